#include "mpi_runtime/nccl/nccl_bootstrap.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include "baton/log.h"
#include "baton/runtime.h"
#include "mpi_runtime/deadline.h"
#include "mpi_runtime/mpi/mpi_types.h"
#include "mpi_runtime/mpi_check.h"

namespace baton::nccl {

namespace {

// One non-blocking MPI call waited for under `timeout`; a Timeout names
// `what` (the call is left in flight: its buffers are the caller's to leak).
template <typename Start>
Status Polled(std::chrono::milliseconds timeout, const std::string& what, Start start) {
  MPI_Request req = MPI_REQUEST_NULL;
  BATON_RETURN_IF_ERROR(start(&req));
  Status s = mpi::Deadline(std::chrono::duration<double>(timeout).count()).Wait(&req, 1);
  if (s.code() != Code::kTimeout) return s;
  return Status::Timeout(kComponent, what + " did not finish within " + std::to_string(timeout.count()) +
                                         " ms (a rank did not come)");
}

}  // namespace

Status ExchangeUniqueId(const NcclApi& api, MPI_Comm comm, ncclUniqueId* id, std::chrono::milliseconds timeout) {
  int rank = 0;
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_rank(comm, &rank)));
  // On the heap: a broadcast abandoned at the deadline may still write it.
  auto* buf = new ncclUniqueId;
  std::memset(buf, 0, sizeof *buf);
  Status local;
  if (rank == 0) {
    local = BATON_NCCL_CHECK(api, api.GetUniqueId(buf));
    if (!local.ok()) std::memset(buf, 0, sizeof *buf);
  }
  // Always entered, also by a rank 0 that failed: the others are in it.
  Status s = Polled(timeout, "MPI_Ibcast of the NCCL unique id", [&](MPI_Request* r) {
    return BATON_MPI_CHECK(MPI_Ibcast(buf, sizeof *buf, MPI_BYTE, 0, comm, r));
  });
  if (s.code() == Code::kTimeout) return s;  // buf stays with the broadcast
  *id = *buf;
  delete buf;
  if (!s.ok()) return s.Annotate("sharing the NCCL unique id");
  return local;
}

Status AgreeOnSuccess(MPI_Comm comm, const Status& local, std::string_view step, std::chrono::milliseconds timeout) {
  int rank = 0, size = 0;
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_rank(comm, &rank)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_size(comm, &size)));
  const std::string agreeing = "agreeing on " + std::string(step);
  // {mine, first}: the lowest failed rank, or `size` when every rank
  // succeeded. On the heap, like the message below: an exchange abandoned
  // at its deadline may still write them.
  auto* lowest = new int[2]{local.ok() ? size : rank, size};
  Status s = Polled(timeout, agreeing + " (MPI_Iallreduce)", [&](MPI_Request* r) {
    return BATON_MPI_CHECK(MPI_Iallreduce(&lowest[0], &lowest[1], 1, MPI_INT, MPI_MIN, comm, r));
  });
  if (s.code() == Code::kTimeout) {
    mpi::KeepInFlight(lowest);  // the all-reduce left in flight may still write it
    return s;
  }
  const int first = lowest[1];
  delete[] lowest;
  if (!s.ok()) return s.Annotate(agreeing);
  if (first == size) return Status::OK();
  // The failed rank's message travels, so that every rank's log says what
  // went wrong, not only where.
  constexpr size_t kText = 1024;
  char* text = new char[kText]();
  if (rank == first) {
    std::string m = local.ToString();
    std::memcpy(text, m.data(), std::min(m.size(), kText - 1));
  }
  s = Polled(timeout, agreeing + " (MPI_Ibcast of the failure)", [&](MPI_Request* r) {
    return BATON_MPI_CHECK(MPI_Ibcast(text, static_cast<int>(kText), MPI_CHAR, first, comm, r));
  });
  if (s.code() == Code::kTimeout) {
    mpi::KeepInFlight(text);  // text stays with the broadcast
    return local.ok() ? s : local;
  }
  const std::string message(text);
  delete[] text;
  if (!local.ok()) return local;
  if (!s.ok()) return s.Annotate(agreeing);
  return Status::Aborted(kComponent, "rank " + std::to_string(first) + " failed " + std::string(step) +
                                         ", so this rank stops too: " + message);
}

Status BootstrapNccl(MPI_Comm world, const NcclPlacement& where, const NcclOptions& options,
                     const NcclApi& api, std::unique_ptr<NcclCommunicator>* out) {
  const auto start = std::chrono::steady_clock::now();
  auto comm = std::make_unique<NcclCommunicator>(api, options);
  // Each step is agreed on before the next, so that a rank that failed is
  // not waited for by the others until their deadline.
  // The slowest rank may spend init_timeout in a step of its own before it
  // comes to the agreement that follows: twice that, then a rank is gone.
  const std::chrono::milliseconds t = 2 * options.init_timeout;
  Status s = AgreeOnSuccess(world, comm->SetUpDevice(where.local_rank), "setting up its CUDA device", t);
  ncclUniqueId id;
  if (s.ok()) {
    Status made = ExchangeUniqueId(api, world, &id, t);
    s = made.code() == Code::kTimeout ? made : AgreeOnSuccess(world, made, "making the NCCL unique id", t);
  }
  if (s.ok())
    s = AgreeOnSuccess(world, comm->InitWorld(id, where.rank, where.size), "creating the NCCL world communicator", t);
  // No node or leaders communicator: no collective uses them yet, and each
  // would cost buffers, proxy threads and an init that can fail
  // (NcclCommunicator::SplitNode/SplitLeaders make them when asked).
  if (!s.ok()) {
    comm->Abort(s);  // no rank finalizes a communicator the others gave up
    return s;
  }
  BATON_LOG(kRuntime, debug) << "NCCL communicator ready (world " << where.size << " ranks, device "
                             << comm->device() << ") in "
                             << std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::steady_clock::now() - start)
                                    .count()
                             << " ms";
  *out = std::move(comm);
  return Status::OK();
}

Status CreateNcclCommunicator(Runtime& rt, const CommOptions& opts, const NcclOptions& nccl_options,
                              const NcclApi& api, std::unique_ptr<Communicator>* out) {
  (void)opts;  // algorithm and ring chunks are the mpi backend's
  NcclPlacement where;
  where.rank = rt.rank();
  where.size = rt.size();
  where.local_rank = rt.local_rank();
  where.node = rt.node_rank();
  where.leader = rt.local_rank() == 0;
  std::unique_ptr<NcclCommunicator> comm;
  Status s = BootstrapNccl(rt.world_comm(), where, nccl_options, api, &comm);
  if (s.code() == Code::kTimeout) {
    // A rank did not come: the policy of a collective's timeout.
    Status t = Status::Timeout(s.component(), s.message() + (nccl_options.context ? "; " + nccl_options.context() : ""));
    if (nccl_options.on_timeout == OnTimeout::kExit) mpi::ExitForRequeue(t.Annotate("creating the nccl communicator"));
    mpi::MarkAbandoned();  // MPI_Finalize would wait for the rank that did not come
    return t;
  }
  BATON_RETURN_IF_ERROR(s);
  *out = std::move(comm);
  return Status::OK();
}

// CommOptions for this backend: op_timeout from opts.timeout (else
// BATON_COLLECTIVE_TIMEOUT, else 600 s), on_timeout, device, init timeout
// and stream from opts.nccl; timeouts name the step and the silent ranks,
// and kExit logs through the runtime's logger before it exits 75.
Status CreateNcclCommunicator(Runtime& rt, const CommOptions& opts, const NcclApi& api,
                              std::unique_ptr<Communicator>* out) {
  double seconds = 0;
  BATON_RETURN_IF_ERROR(mpi::ResolveCollectiveTimeout(opts.timeout, &seconds));
  if (opts.nccl.init_timeout < 0 || opts.nccl.device < -1)
    return Status::InvalidArgument(kComponent, "CommOptions::nccl: init_timeout " +
                                                   std::to_string(opts.nccl.init_timeout) + " and device " +
                                                   std::to_string(opts.nccl.device) +
                                                   " (a positive number or 0; a device number or -1)");
  NcclOptions o;
  o.op_timeout = std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
  if (opts.nccl.init_timeout > 0)
    o.init_timeout = std::chrono::milliseconds(static_cast<long long>(opts.nccl.init_timeout * 1000));
  o.device = opts.nccl.device;
  o.stream = static_cast<cudaStream_t>(opts.nccl.stream);
  o.on_timeout = opts.on_timeout;
  Runtime* runtime = &rt;
  o.context = [runtime] {
    std::string msg;
    if (runtime->step() >= 0) msg += "at step " + std::to_string(runtime->step()) + "; ";
    return msg + "ranks not answering heartbeats: " + runtime->DescribeSilentRanks();
  };
  o.exit_for_requeue = [](const Status& why, std::chrono::steady_clock::time_point at) {
    mpi::ExitForRequeueAt(why, at);
  };
  // A broken communicator (a timeout under kReturn, a peer's error) means a
  // peer that may never come: MPI_Finalize would wait for it.
  o.on_break = [](const Status&) { mpi::MarkAbandoned(); };
  return CreateNcclCommunicator(rt, opts, o, api, out);
}

}  // namespace baton::nccl
