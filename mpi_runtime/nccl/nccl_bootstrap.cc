#include "mpi_runtime/nccl/nccl_bootstrap.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include "baton/log.h"
#include "baton/runtime.h"
#include "mpi_runtime/deadline.h"
#include "mpi_runtime/mpi_check.h"

namespace baton::nccl {

Status ExchangeUniqueId(const NcclApi& api, MPI_Comm comm, ncclUniqueId* id) {
  int rank = 0;
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_rank(comm, &rank)));
  std::memset(id, 0, sizeof *id);
  Status local;
  if (rank == 0) {
    local = BATON_NCCL_CHECK(api, api.GetUniqueId(id));
    if (!local.ok()) std::memset(id, 0, sizeof *id);
  }
  // Always entered, also by a rank 0 that failed: the others are in it.
  Status s = BATON_MPI_CHECK(MPI_Bcast(id, sizeof *id, MPI_BYTE, 0, comm));
  if (!s.ok()) return s.Annotate("sharing the NCCL unique id");
  return local;
}

Status AgreeOnSuccess(MPI_Comm comm, const Status& local, std::string_view step) {
  int rank = 0, size = 0;
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_rank(comm, &rank)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_size(comm, &size)));
  // The lowest failed rank, or `size` when every rank succeeded.
  int mine = local.ok() ? size : rank, first = size;
  Status s = BATON_MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm));
  if (!s.ok()) return s.Annotate(std::string("agreeing on ") + std::string(step));
  if (first == size) return Status::OK();
  // The failed rank's message travels, so that every rank's log says what
  // went wrong, not only where.
  char text[1024] = {};
  if (rank == first) {
    std::string m = local.ToString();
    std::memcpy(text, m.data(), std::min(m.size(), sizeof text - 1));
  }
  s = BATON_MPI_CHECK(MPI_Bcast(text, sizeof text, MPI_CHAR, first, comm));
  if (!local.ok()) return local;
  if (!s.ok()) return s.Annotate(std::string("agreeing on ") + std::string(step));
  return Status::Aborted(kComponent, "rank " + std::to_string(first) + " failed " +
                                         std::string(step) + ", so this rank stops too: " + text);
}

Status BootstrapNccl(MPI_Comm world, const NcclPlacement& where, const NcclOptions& options,
                     const NcclApi& api, std::unique_ptr<NcclCommunicator>* out) {
  const auto start = std::chrono::steady_clock::now();
  auto comm = std::make_unique<NcclCommunicator>(api, options);
  // Each step is agreed on before the next, so that a rank that failed is
  // not waited for by the others until their deadline.
  Status s = AgreeOnSuccess(world, comm->SetUpDevice(where.local_rank), "setting up its CUDA device");
  ncclUniqueId id;
  if (s.ok()) s = AgreeOnSuccess(world, ExchangeUniqueId(api, world, &id), "making the NCCL unique id");
  if (s.ok())
    s = AgreeOnSuccess(world, comm->InitWorld(id, where.rank, where.size),
                       "creating the NCCL world communicator");
  if (s.ok()) s = AgreeOnSuccess(world, comm->SplitNode(where.node), "creating the NCCL node communicator");
  if (s.ok())
    s = AgreeOnSuccess(world, comm->SplitLeaders(where.leader), "creating the NCCL leaders communicator");
  if (!s.ok()) {
    comm->Abort(s);  // no rank finalizes a communicator the others gave up
    return s;
  }
  BATON_LOG(kRuntime, debug) << "NCCL communicators ready (world " << where.size << " ranks, node "
                             << where.node << (where.leader ? ", leader" : "") << ") in "
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
  BATON_RETURN_IF_ERROR(BootstrapNccl(rt.world_comm(), where, nccl_options, api, &comm));
  *out = std::move(comm);
  return Status::OK();
}

// The deadline and policy of CommOptions: op_timeout from opts.timeout
// (else BATON_COLLECTIVE_TIMEOUT, else 600 s); a timeout, after the abort,
// names the step and the silent ranks and exits 75 unless kReturn.
Status CreateNcclCommunicator(Runtime& rt, const CommOptions& opts, const NcclApi& api,
                              std::unique_ptr<Communicator>* out) {
  double seconds = 0;
  BATON_RETURN_IF_ERROR(mpi::ResolveCollectiveTimeout(opts.timeout, &seconds));
  NcclOptions o;
  o.op_timeout = std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
  Runtime* runtime = &rt;
  const OnTimeout policy = opts.on_timeout;
  o.on_timeout = [runtime, policy](const Status& t) {
    std::string msg = t.message();
    if (runtime->step() >= 0) msg += "; at step " + std::to_string(runtime->step());
    msg += "; ranks not answering heartbeats: " + runtime->DescribeSilentRanks();
    Status full = Status::Timeout(t.component(), msg);
    if (policy == OnTimeout::kExit) mpi::ExitForRequeue(full);
    return full;
  };
  return CreateNcclCommunicator(rt, opts, o, api, out);
}

}  // namespace baton::nccl
