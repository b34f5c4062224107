#include "mpi_runtime/mpi/mpi_communicator.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "mpi_runtime/deadline.h"
#include "mpi_runtime/mpi/auto_algorithm.h"
#include "mpi_runtime/mpi/collectives.h"
#include "mpi_runtime/mpi/mpi_types.h"
#include "mpi_runtime/mpi/watchdog.h"
#include "mpi_runtime/mpi/worker.h"
#include "mpi_runtime/mpi_check.h"
#include "mpi_runtime/setup_guard.h"

namespace baton::mpi {
namespace {

Status Dup(MPI_Comm from, MPI_Comm* to) {
  if (from == MPI_COMM_NULL) return Status::OK();
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_dup(from, to)));
  return BATON_MPI_CHECK(MPI_Comm_set_errhandler(*to, MPI_ERRORS_RETURN));
}

void Free(Comms* c) {
  if (Failed()) return;  // mpi_check.h: leaked after an MPI failure
  for (MPI_Comm* m : {&c->world, &c->node, &c->leaders})
    if (*m != MPI_COMM_NULL) MPI_Comm_free(m);
}

CallInfo Info(const char* name, size_t count, DType t, int op = -1, int root = -1, bool per_rank = false) {
  CallInfo i;
  i.name = name;
  i.count = count;
  i.dtype = t;
  i.op = op;
  i.root = root;
  i.per_rank = per_rank;
  return i;
}
CallInfo Info(const char* name, size_t count, DType t, ReduceOp op, int root = -1, bool per_rank = false) {
  return Info(name, count, t, static_cast<int>(op), root, per_rank);
}

size_t Total(const std::vector<size_t>& counts) {
  size_t n = 0;
  for (size_t c : counts) n += c;
  return n;
}

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(Runtime& rt, const CommOptions& options, Algorithm algorithm, double timeout, BufferCheck check)
      : rt_(&rt), options_(options), algorithm_(algorithm), timeout_(timeout),
        blocking_(options.on_timeout == OnTimeout::kExit), check_(std::move(check)) {}
  ~MpiCommunicator() override {
    worker_.reset();  // finishes what was submitted before the communicators go
    watchdog_.reset();
    // A collective abandoned at its deadline still uses its communicator:
    // freeing it would let MPI reuse the context id for a new one, which
    // could then match the late collective's messages. Leaked instead;
    // likewise after an MPI failure (mpi_check.h: MPI is not called again).
    if (broken_.load() || Failed()) return;
    Free(&main_);
    Free(&async_);
  }

  // Collective: the duplicates of the runtime's communicators and auto's
  // table, each step under the deadline (setup_guard.h). After a timeout
  // under kReturn the steps may still write this object: the caller
  // leaks it.
  Status Init(Runtime& rt) {
    SetupGuard guard(timeout_, options_.on_timeout, rt_, "creating the communicator");
    BATON_RETURN_IF_ERROR(guard.Run([this, &rt](const SetupGuard::Steps& step) {
      for (Comms* c : {&main_, &async_}) {
        step("MPI_Comm_dup of the world");
        BATON_RETURN_IF_ERROR(Dup(rt.world_comm(), &c->world));
        step("MPI_Comm_dup of the node communicator");
        BATON_RETURN_IF_ERROR(Dup(rt.node_comm(), &c->node));
        step("MPI_Comm_dup of the leaders communicator");
        BATON_RETURN_IF_ERROR(Dup(rt.leaders_comm(), &c->leaders));
        c->rank = rt.rank();
        c->size = rt.size();
      }
      if (algorithm_ != Algorithm::kAuto) return Status::OK();
      step("MPI_Bcast of auto's tables");
      return AutoAlgorithm::Create(main_.world, main_.rank, main_.size, rt.topology(), &auto_);
    }));
    worker_ = std::make_unique<Worker>();
    if (blocking_)
      watchdog_ = std::make_unique<Watchdog>(
          timeout_, [this](const CallInfo& info) { ExitForRequeue(TimeoutStatus(rt_, Describe(info), timeout_)); });
    return Status::OK();
  }

  // What auto runs for an all-reduce of `bytes` now (auto_algorithm.h).
  Algorithm AutoChoice(size_t bytes) const { return auto_ ? auto_->Current(bytes) : algorithm_; }

  int rank() const override { return main_.rank; }
  int size() const override { return main_.size; }
  Backend backend() const override { return Backend::kMpi; }
  int device() const override { return -1; }

  Status AllReduce(const void* send, void* recv, size_t count, DType t, ReduceOp op) override {
    BATON_RETURN_IF_ERROR(Host("all_reduce", count, send, recv));
    const size_t bytes = count * DTypeSize(t);
    const Algorithm algo = AutoChoice(bytes);
    Algorithm candidate = algo;
    const bool sample = auto_ && auto_->NextSample(bytes, &candidate);
    return Run(kMain, Info("all_reduce", count, t, op), [&](const CallContext& x) {
      if (!sample) return mpi::AllReduce(x, send, recv, count, t, op, algo);
      // A sample of auto's measurement: the caller's result comes from
      // `algo` as ever, then `candidate` is timed on a copy of the input
      // (taken first: recv may be send). The last sample of its size class
      // makes every rank agree and decide, here, at the same call on every
      // rank.
      char* copy = auto_->SampleBuffer(bytes);
      std::memcpy(copy, send, bytes);
      Status s = mpi::AllReduce(x, send, recv, count, t, op, algo);
      if (!s.ok()) return s;
      const auto t0 = std::chrono::steady_clock::now();
      s = mpi::AllReduce(x, copy, copy, count, t, op, candidate);
      if (s.code() == Code::kTimeout) auto_->AbandonSample();
      if (!s.ok()) return s;
      return auto_->Record(bytes, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                           x.deadline);
    });
  }
  Status AllGather(const void* send, void* recv, size_t count, DType t) override {
    BATON_RETURN_IF_ERROR(Host("all_gather", count, send, recv));
    return Run(kMain, Info("all_gather", count, t, -1, -1, true),
               [&](const CallContext& x) { return mpi::AllGather(x, send, recv, count, t, algorithm_); });
  }
  Status ReduceScatter(const void* send, void* recv, size_t count, DType t, ReduceOp op) override {
    BATON_RETURN_IF_ERROR(Host("reduce_scatter", count, send, recv));
    return Run(kMain, Info("reduce_scatter", count, t, op, -1, true), [&](const CallContext& x) {
      return mpi::ReduceScatter(x, send, recv, count, t, op, algorithm_);
    });
  }
  Status AllGatherV(const void* send, void* recv, const std::vector<size_t>& counts, DType t) override {
    BATON_RETURN_IF_ERROR(Host("all_gather_v", Total(counts), send, recv));
    return Run(kMain, Info("all_gather_v", Total(counts), t),
               [&](const CallContext& x) { return mpi::AllGatherV(x, send, recv, counts, t, algorithm_); });
  }
  Status ReduceScatterV(const void* send, void* recv, const std::vector<size_t>& counts, DType t,
                        ReduceOp op) override {
    BATON_RETURN_IF_ERROR(Host("reduce_scatter_v", Total(counts), send, recv));
    return Run(kMain, Info("reduce_scatter_v", Total(counts), t, op),
               [&](const CallContext& x) { return mpi::ReduceScatterV(x, send, recv, counts, t, op, algorithm_); });
  }
  Status Broadcast(void* buffer, size_t count, DType t, int root) override {
    BATON_RETURN_IF_ERROR(Host("broadcast", count, buffer, buffer));
    return Run(kMain, Info("broadcast", count, t, -1, root),
               [&](const CallContext& x) { return mpi::Broadcast(x, buffer, count, t, root); });
  }
  Status AllToAll(const void* send, void* recv, size_t count, DType t) override {
    BATON_RETURN_IF_ERROR(Host("all_to_all", count, send, recv));
    return Run(kMain, Info("all_to_all", count, t, -1, -1, true),
               [&](const CallContext& x) { return mpi::AllToAll(x, send, recv, count, t); });
  }
  Status Barrier() override {
    return Run(kMain, Info("barrier", 0, DType::kU8), [&](const CallContext& x) { return mpi::Barrier(x); });
  }

  // The non-blocking forms: the same bodies on the worker's thread and
  // communicators. An all-reduce's algorithm is chosen now, in the
  // caller's thread, where auto's state is the same on every rank (never
  // measured: see online_tuner.h).
  Status IAllReduce(const void* send, void* recv, size_t count, DType t, ReduceOp op,
                    std::unique_ptr<Request>* req) override {
    BATON_RETURN_IF_ERROR(Host("all_reduce", count, send, recv));
    const Algorithm algo = AutoChoice(count * DTypeSize(t));
    return Async(req, Info("all_reduce", count, t, op),
                 [=](const CallContext& x) { return mpi::AllReduce(x, send, recv, count, t, op, algo); });
  }
  Status IAllGather(const void* send, void* recv, size_t count, DType t, std::unique_ptr<Request>* req) override {
    BATON_RETURN_IF_ERROR(Host("all_gather", count, send, recv));
    const Algorithm algo = algorithm_;
    return Async(req, Info("all_gather", count, t, -1, -1, true),
                 [=](const CallContext& x) { return mpi::AllGather(x, send, recv, count, t, algo); });
  }
  Status IReduceScatter(const void* send, void* recv, size_t count, DType t, ReduceOp op,
                        std::unique_ptr<Request>* req) override {
    BATON_RETURN_IF_ERROR(Host("reduce_scatter", count, send, recv));
    const Algorithm algo = algorithm_;
    return Async(req, Info("reduce_scatter", count, t, op, -1, true),
                 [=](const CallContext& x) { return mpi::ReduceScatter(x, send, recv, count, t, op, algo); });
  }
  Status IBroadcast(void* buffer, size_t count, DType t, int root, std::unique_ptr<Request>* req) override {
    BATON_RETURN_IF_ERROR(Host("broadcast", count, buffer, buffer));
    return Async(req, Info("broadcast", count, t, -1, root),
                 [=](const CallContext& x) { return mpi::Broadcast(x, buffer, count, t, root); });
  }
  Status IAllToAll(const void* send, void* recv, size_t count, DType t, std::unique_ptr<Request>* req) override {
    BATON_RETURN_IF_ERROR(Host("all_to_all", count, send, recv));
    return Async(req, Info("all_to_all", count, t, -1, -1, true),
                 [=](const CallContext& x) { return mpi::AllToAll(x, send, recv, count, t); });
  }
  Status IBarrier(std::unique_ptr<Request>* req) override {
    return Async(req, Info("barrier", 0, DType::kU8), [=](const CallContext& x) { return mpi::Barrier(x); });
  }
  Status IAllGatherV(const void* send, void* recv, const std::vector<size_t>& counts, DType t,
                     std::unique_ptr<Request>* req) override {
    BATON_RETURN_IF_ERROR(Host("all_gather_v", Total(counts), send, recv));
    const Algorithm algo = algorithm_;
    return Async(req, Info("all_gather_v", Total(counts), t),
                 [=](const CallContext& x) { return mpi::AllGatherV(x, send, recv, counts, t, algo); });
  }
  Status IReduceScatterV(const void* send, void* recv, const std::vector<size_t>& counts, DType t, ReduceOp op,
                         std::unique_ptr<Request>* req) override {
    BATON_RETURN_IF_ERROR(Host("reduce_scatter_v", Total(counts), send, recv));
    const Algorithm algo = algorithm_;
    return Async(req, Info("reduce_scatter_v", Total(counts), t, op),
                 [=](const CallContext& x) { return mpi::ReduceScatterV(x, send, recv, counts, t, op, algo); });
  }

 private:
  // The watchdog's slots: blocking calls (the caller's thread) and the
  // non-blocking ones (the worker's thread).
  static constexpr int kMain = 0, kAsync = 1;
  using Body = std::function<Status(const CallContext&)>;

  // The mpi backend takes host memory: device buffers are refused here,
  // before MPI or memcpy could fault on them. Nothing moves for count 0.
  Status Host(const char* what, size_t count, const void* send, const void* recv) const {
    if (!check_ || count == 0) return Status::OK();
    BATON_RETURN_IF_ERROR(check_(send, "send", what));
    return recv == send ? Status::OK() : check_(recv, "recv", what);
  }

  Status Async(std::unique_ptr<Request>* req, CallInfo info, Body body) {
    *req = std::make_unique<FutureRequest>(
        worker_->Submit([this, info, body = std::move(body)] { return Run(kAsync, info, body); }));
    return Status::OK();
  }

  // Runs one collective under the communicator's deadline policy. kExit:
  // the watchdog watches the call (armed around it) and ends the process
  // with 75 at the deadline; the body uses MPI's blocking calls where it
  // can. kReturn: the body polls non-blocking MPI against the deadline,
  // and a timeout becomes the full message and breaks the communicator. A
  // broken communicator answers at once.
  template <typename F>
  Status Run(int slot, CallInfo info, const F& body) {
    if (broken_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(broken_mu_);
      return broken_status_;
    }
    info.non_blocking = slot == kAsync;
    const Deadline deadline(timeout_, blocking_);
    // MPI failed (mpi_check.h), in an earlier call or in this one: no MPI
    // call is made (the body's own checks refuse), and under kExit the
    // rank waits out this call's deadline and exits 75, as a rank whose
    // peer stopped would have (ExitForRequeueAt says why it waits).
    auto failed = [&](const Status& why) {
      const Status f = why.Annotate(Describe(info));
      if (options_.on_timeout == OnTimeout::kExit) ExitForRequeueAt(f, deadline.at());
      return f;
    };
    if (Failed()) return failed(FailedStatus(info.name, __FILE__, __LINE__));
    const CallContext x{slot == kMain ? main_ : async_, deadline, options_.ring_chunk_bytes};
    if (watchdog_) watchdog_->Arm(slot, info);
    Status s = body(x);
    if (watchdog_) watchdog_->Disarm(slot);
    if (!s.ok() && Failed()) return failed(s);
    if (s.code() != Code::kTimeout) return s;
    Status t = TimeoutStatus(rt_, Describe(info), timeout_);
    {
      std::lock_guard<std::mutex> lock(broken_mu_);
      if (!broken_.load()) broken_status_ = t.Annotate("communicator broken by an earlier timeout");
      broken_.store(true, std::memory_order_release);
    }
    if (options_.on_timeout == OnTimeout::kExit) ExitForRequeue(t);
    MarkAbandoned();
    return t;
  }

  Runtime* rt_;  // outlives the communicator: step and silent ranks for timeouts
  CommOptions options_;
  Algorithm algorithm_;  // resolved (ResolveAlgorithm)
  double timeout_;  // seconds, resolved
  bool blocking_;   // kExit: MPI's blocking calls under the watchdog
  BufferCheck check_;  // null: no check
  std::unique_ptr<Watchdog> watchdog_;
  std::unique_ptr<AutoAlgorithm> auto_;  // algorithm auto only
  Comms main_, async_;
  std::unique_ptr<Worker> worker_;
  std::atomic<bool> broken_{false};
  std::mutex broken_mu_;
  Status broken_status_;
};

}  // namespace

bool AutoAlgorithmOf(const Communicator& comm, size_t bytes, Algorithm* out) {
  const auto* m = dynamic_cast<const MpiCommunicator*>(&comm);
  if (m == nullptr) return false;
  *out = m->AutoChoice(bytes);
  return true;
}

Status CreateMpiCommunicator(Runtime& runtime, const CommOptions& options, std::unique_ptr<Communicator>* out) {
  return CreateMpiCommunicator(runtime, options, nullptr, out);
}

Status CreateMpiCommunicator(Runtime& runtime, const CommOptions& options, BufferCheck check,
                             std::unique_ptr<Communicator>* out) {
  double timeout = 0;
  Algorithm algorithm = Algorithm::kNative;
  BATON_RETURN_IF_ERROR(ResolveCollectiveTimeout(options.timeout, &timeout));
  BATON_RETURN_IF_ERROR(ResolveAlgorithm(options.algorithm, &algorithm));
  auto comm = std::make_unique<MpiCommunicator>(runtime, options, algorithm, timeout, std::move(check));
  Status s = comm->Init(runtime);
  if (s.code() == Code::kTimeout) (void)comm.release();  // a step in flight may still write it
  BATON_RETURN_IF_ERROR(s);
  *out = std::move(comm);
  return Status::OK();
}

}  // namespace baton::mpi
