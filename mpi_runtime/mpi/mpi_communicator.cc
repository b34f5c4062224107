#include "mpi_runtime/mpi/mpi_communicator.h"

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "baton/log.h"
#include "mpi_runtime/deadline.h"
#include "base/env_options.h"
#include "mpi_runtime/mpi/online_tuner.h"
#include "mpi_runtime/mpi/reduce_kernels.h"
#include "mpi_runtime/mpi/tune_table.h"
#include "mpi_runtime/mpi/watchdog.h"
#include "mpi_runtime/mpi_check.h"

namespace baton::mpi {
namespace {

constexpr const char* kComponent = "runtime";

MPI_Datatype MpiType(DType work) {
  switch (work) {
    case DType::kF64: return MPI_DOUBLE;
    case DType::kI32: return MPI_INT32_T;
    case DType::kI64: return MPI_INT64_T;
    case DType::kU8: return MPI_UINT8_T;
    default: return MPI_FLOAT;  // f32, and f16/bf16 widened to f32
  }
}

MPI_Op MpiOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
    default: return MPI_SUM;  // kSum, and kAvg before its division
  }
}

bool IsHalf(DType t) { return t == DType::kF16 || t == DType::kBF16; }

// MPI counts are int: larger messages are refused by name, not truncated.
Status CheckCount(const char* what, size_t count, size_t esize) {
  if (count > static_cast<size_t>(INT_MAX) || count * esize / esize != count)
    return Status::InvalidArgument(kComponent, std::string(what) + ": count " + std::to_string(count) +
                                                   " exceeds MPI's int count limit");
  return Status::OK();
}

Status CheckOp(const char* what, DType t, ReduceOp op) {
  if (op == ReduceOp::kAvg && !IsFloating(t))
    return Status::InvalidArgument(kComponent, std::string(what) + ": avg is for floating types, not " +
                                                   std::string(DTypeName(t)));
  return Status::OK();
}

// A collective that passed its deadline is still in flight inside MPI and
// may yet read or write its buffers: a temporary buffer it uses is handed
// over to it (leaked) instead of freed.
template <typename T>
void Abandon(std::vector<T>* v) {
  new std::vector<T>(std::move(*v));  // the heap block moves with it
}

// "1048576 bytes (f32 sum)": the size and kind of a collective, for timeouts.
std::string Bytes(size_t count, DType t) { return std::to_string(count * DTypeSize(t)) + " bytes"; }

struct Comms {
  MPI_Comm world = MPI_COMM_NULL, node = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
  int rank = 0, size = 1;
};

Status Dup(MPI_Comm from, MPI_Comm* to) {
  if (from == MPI_COMM_NULL) return Status::OK();
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_dup(from, to)));
  return BATON_MPI_CHECK(MPI_Comm_set_errhandler(*to, MPI_ERRORS_RETURN));
}

void Free(Comms* c) {
  for (MPI_Comm* m : {&c->world, &c->node, &c->leaders})
    if (*m != MPI_COMM_NULL) MPI_Comm_free(m);
}

// Segment i of `count` elements split over `parts`: the first count % parts
// segments are one element longer.
void Segments(size_t count, int parts, std::vector<size_t>* start, std::vector<size_t>* len) {
  start->resize(static_cast<size_t>(parts));
  len->resize(static_cast<size_t>(parts));
  const size_t base = count / static_cast<size_t>(parts), rem = count % static_cast<size_t>(parts);
  for (size_t i = 0; i < static_cast<size_t>(parts); ++i) {
    (*start)[i] = i * base + std::min(i, rem);
    (*len)[i] = base + (i < rem ? 1 : 0);
  }
}

// The ring over `comm`, in place on `work` (elements of the work type `t`):
// reduce-scatter leaves the fully reduced segment r on rank r, all-gather
// then passes every segment around. Each segment moves in chunks whose
// receives are all posted first and reduced as they arrive, so the
// reduction of one chunk overlaps the transfer of the next.
class Ring {
 public:
  Ring(MPI_Comm comm, int rank, int size, DType t, ReduceOp op, size_t chunk_bytes, const Deadline& deadline)
      : comm_(comm), rank_(rank), size_(size), t_(t), op_(op), esize_(DTypeSize(t)),
        chunk_(std::max<size_t>(1, chunk_bytes / DTypeSize(t))), deadline_(deadline) {}

  Status ReduceScatter(char* work, const std::vector<size_t>& start, const std::vector<size_t>& len) {
    size_t max_len = 0;
    for (size_t l : len) max_len = std::max(max_len, l);
    std::vector<char> tmp(max_len * esize_);
    for (int s = 0; s < size_ - 1; ++s) {
      const int send = Mod(rank_ - s - 1), recv = Mod(rank_ - s - 2);
      std::vector<MPI_Request> recvs, sends;
      BATON_RETURN_IF_ERROR(Post(tmp.data(), len[recv], Left(), /*is_send=*/false, &recvs));
      BATON_RETURN_IF_ERROR(Post(work + start[send] * esize_, len[send], Right(), true, &sends));
      Status st;
      for (size_t k = 0; k < recvs.size() && st.ok(); ++k) {
        st = deadline_.Wait(&recvs[k], 1);
        if (!st.ok()) break;
        const size_t off = k * chunk_, n = std::min(chunk_, len[recv] - off);
        Reduce(t_, op_, tmp.data() + off * esize_, work + (start[recv] + off) * esize_, n);
      }
      if (st.ok()) st = deadline_.Wait(sends.data(), static_cast<int>(sends.size()));
      if (!st.ok()) {
        if (st.code() == Code::kTimeout) Abandon(&tmp);
        return st;
      }
    }
    return Status::OK();
  }

  Status AllGather(char* work, const std::vector<size_t>& start, const std::vector<size_t>& len) {
    for (int s = 0; s < size_ - 1; ++s) {
      const int send = Mod(rank_ - s), recv = Mod(rank_ - s - 1);
      std::vector<MPI_Request> reqs;
      BATON_RETURN_IF_ERROR(Post(work + start[recv] * esize_, len[recv], Left(), false, &reqs));
      BATON_RETURN_IF_ERROR(Post(work + start[send] * esize_, len[send], Right(), true, &reqs));
      BATON_RETURN_IF_ERROR(deadline_.Wait(reqs.data(), static_cast<int>(reqs.size())));
    }
    return Status::OK();
  }

 private:
  int Mod(int x) const { return ((x % size_) + size_) % size_; }
  int Left() const { return Mod(rank_ - 1); }
  int Right() const { return Mod(rank_ + 1); }

  // One message per chunk; messages between a pair keep their order in MPI,
  // so chunk k of a segment always meets receive k.
  Status Post(char* data, size_t n, int peer, bool is_send, std::vector<MPI_Request>* reqs) {
    for (size_t off = 0; off < n; off += chunk_) {
      const int c = static_cast<int>(std::min(chunk_, n - off));
      MPI_Request r;
      Status s = is_send ? BATON_MPI_CHECK(MPI_Isend(data + off * esize_, c, MpiType(t_), peer, 0, comm_, &r))
                         : BATON_MPI_CHECK(MPI_Irecv(data + off * esize_, c, MpiType(t_), peer, 0, comm_, &r));
      BATON_RETURN_IF_ERROR(s);
      reqs->push_back(r);
    }
    return Status::OK();
  }

  MPI_Comm comm_;
  int rank_, size_;
  DType t_;
  ReduceOp op_;
  size_t esize_, chunk_;
  const Deadline& deadline_;
};

// Runs closures in order on one thread; a Request waits for its closure.
class Worker {
 public:
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

  std::shared_future<Status> Submit(std::function<Status()> fn) {
    auto task = std::make_shared<std::packaged_task<Status()>>(std::move(fn));
    std::shared_future<Status> result = task->get_future().share();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
      queue_.push_back([task] { (*task)(); });
    }
    cv_.notify_one();
    return result;
  }

 private:
  void Loop() {
    while (true) {
      std::function<void()> next;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and everything submitted ran
        next = std::move(queue_.front());
        queue_.pop_front();
      }
      next();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

class FutureRequest : public Request {
 public:
  explicit FutureRequest(std::shared_future<Status> f) : f_(std::move(f)) {}
  ~FutureRequest() override {
    if (f_.valid()) f_.wait();
  }
  Status Wait() override { return f_.get(); }
  Status Test(bool* done) override {
    *done = f_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    return *done ? f_.get() : Status::OK();
  }

 private:
  std::shared_future<Status> f_;
};

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(Runtime& rt, const CommOptions& options, double timeout)
      : rt_(&rt), topology_(rt.topology()), options_(options), timeout_(timeout),
        blocking_(options.on_timeout == OnTimeout::kExit) {}
  ~MpiCommunicator() override {
    worker_.reset();  // finishes what was submitted before the communicators go
    watchdog_.reset();
    // A collective abandoned at its deadline still uses its communicator:
    // freeing it would let MPI reuse the context id for a new one, which
    // could then match the late collective's messages. Leaked instead.
    if (broken_.load()) return;
    Free(&main_);
    Free(&async_);
  }

  Status Init(Runtime& rt) {
    for (Comms* c : {&main_, &async_}) {
      BATON_RETURN_IF_ERROR(Dup(rt.world_comm(), &c->world));
      BATON_RETURN_IF_ERROR(Dup(rt.node_comm(), &c->node));
      BATON_RETURN_IF_ERROR(Dup(rt.leaders_comm(), &c->leaders));
      c->rank = rt.rank();
      c->size = rt.size();
    }
    worker_ = std::make_unique<Worker>();
    if (blocking_)
      watchdog_ = std::make_unique<Watchdog>(
          timeout_, [this](const CallInfo& info) { ExitForRequeue(TimeoutStatus(rt_, Describe(info), timeout_)); });
    if (options_.algorithm == Algorithm::kAuto) {
      LoadTable();
      BATON_RETURN_IF_ERROR(MakeTuner());
    }
    return Status::OK();
  }

  // What auto runs for an all-reduce of `bytes` now (for the benchmark's
  // column): the table's choice, the online choice once decided, else
  // native.
  Algorithm AutoChoice(size_t bytes) const {
    if (tuner_) return FromTuned(tuner_->Decided(bytes));
    return ChooseAlgorithm(options_.algorithm, bytes, topology_, &table_);
  }

  int rank() const override { return main_.rank; }
  int size() const override { return main_.size; }
  Backend backend() const override { return Backend::kMpi; }

  Status AllReduce(const void* send, void* recv, size_t count, DType t, ReduceOp op) override {
    const size_t bytes = count * DTypeSize(t);
    bool measure = false;
    const Algorithm algo = tuner_ && count > 0 ? FromTuned(tuner_->Next(bytes, &measure))
                                               : ChooseAlgorithm(options_.algorithm, bytes, topology_, &table_);
    return Run(kMain, Info("all_reduce", count, t, op), [&] {
      const auto t0 = std::chrono::steady_clock::now();
      Status s = DoAllReduce(main_, send, recv, count, t, op, algo);
      if (!s.ok() || !measure) return s;
      // A sample of the online measurement (online_tuner.h); the last one
      // of its size class makes every rank agree and decide, here, at the
      // same call on every rank.
      if (tuner_->Record(bytes, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()))
        s = AgreeOnline(bytes);
      return s;
    });
  }
  Status AllGather(const void* send, void* recv, size_t count, DType t) override {
    return Run(kMain, Info("all_gather", count, t, -1, -1, true), [&] { return DoAllGather(main_, send, recv, count, t); });
  }
  Status ReduceScatter(const void* send, void* recv, size_t count, DType t, ReduceOp op) override {
    return Run(kMain, Info("reduce_scatter", count, t, op, -1, true),
               [&] { return DoReduceScatter(main_, send, recv, count, t, op); });
  }
  Status Broadcast(void* buffer, size_t count, DType t, int root) override {
    return Run(kMain, Info("broadcast", count, t, -1, root), [&] { return DoBroadcast(main_, buffer, count, t, root); });
  }
  Status AllToAll(const void* send, void* recv, size_t count, DType t) override {
    return Run(kMain, Info("all_to_all", count, t, -1, -1, true), [&] { return DoAllToAll(main_, send, recv, count, t); });
  }
  Status Barrier() override { return Run(kMain, Info("barrier", 0, DType::kU8), [&] { return DoBarrier(main_); }); }

  Status IAllReduce(const void* send, void* recv, size_t count, DType t, ReduceOp op,
                    std::unique_ptr<Request>* req) override {
    // Chosen now, in the caller's thread, where the online tuner's state
    // is the same on every rank (never measured: see online_tuner.h).
    const Algorithm algo = AutoChoice(count * DTypeSize(t));
    return Async(req, [=] {
      return Run(kAsync, Info("all_reduce", count, t, op),
                 [&] { return DoAllReduce(async_, send, recv, count, t, op, algo); });
    });
  }
  Status IAllGather(const void* send, void* recv, size_t count, DType t, std::unique_ptr<Request>* req) override {
    return Async(req, [=] {
      return Run(kAsync, Info("all_gather", count, t, -1, -1, true),
                 [&] { return DoAllGather(async_, send, recv, count, t); });
    });
  }
  Status IReduceScatter(const void* send, void* recv, size_t count, DType t, ReduceOp op,
                        std::unique_ptr<Request>* req) override {
    return Async(req, [=] {
      return Run(kAsync, Info("reduce_scatter", count, t, op, -1, true),
                 [&] { return DoReduceScatter(async_, send, recv, count, t, op); });
    });
  }
  Status IBroadcast(void* buffer, size_t count, DType t, int root, std::unique_ptr<Request>* req) override {
    return Async(req, [=] {
      return Run(kAsync, Info("broadcast", count, t, -1, root), [&] { return DoBroadcast(async_, buffer, count, t, root); });
    });
  }
  Status IAllToAll(const void* send, void* recv, size_t count, DType t, std::unique_ptr<Request>* req) override {
    return Async(req, [=] {
      return Run(kAsync, Info("all_to_all", count, t, -1, -1, true),
                 [&] { return DoAllToAll(async_, send, recv, count, t); });
    });
  }
  Status IBarrier(std::unique_ptr<Request>* req) override {
    return Async(req, [=] { return Run(kAsync, Info("barrier", 0, DType::kU8), [&] { return DoBarrier(async_); }); });
  }

 private:
  Status Async(std::unique_ptr<Request>* req, std::function<Status()> fn) {
    *req = std::make_unique<FutureRequest>(worker_->Submit(std::move(fn)));
    return Status::OK();
  }

  // The watchdog's slots: blocking calls (the caller's thread) and the
  // non-blocking ones (the worker's thread).
  static constexpr int kMain = 0, kAsync = 1;

  static CallInfo Info(const char* name, size_t count, DType t, int op = -1, int root = -1, bool per_rank = false) {
    CallInfo i;
    i.name = name;
    i.count = count;
    i.dtype = t;
    i.op = op;
    i.root = root;
    i.per_rank = per_rank;
    return i;
  }
  static CallInfo Info(const char* name, size_t count, DType t, ReduceOp op, int root = -1, bool per_rank = false) {
    return Info(name, count, t, static_cast<int>(op), root, per_rank);
  }

  // "all_reduce of 1048576 bytes (f32 sum)", "broadcast of 8 bytes from
  // rank 0", "barrier": what a timeout message names.
  static std::string Describe(const CallInfo& i) {
    static const char* const kOps[] = {"sum", "max", "min", "avg"};  // ReduceOp order
    std::string out = std::string(i.non_blocking ? "non-blocking " : "") + i.name;
    if (std::string_view(i.name) == "barrier") return out;
    out += " of " + Bytes(i.count, i.dtype);
    if (i.per_rank) out += " per rank";
    if (i.root >= 0) return out + " from rank " + std::to_string(i.root);
    out += " (" + std::string(DTypeName(i.dtype));
    if (i.op >= 0 && i.op < 4) out += std::string(" ") + kOps[i.op];
    return out + ")";
  }

  // Runs one collective under the communicator's deadline policy. kExit:
  // the watchdog watches the call (armed around it) and ends the process
  // with 75 at the deadline; the Do* functions use MPI's blocking calls
  // where they can. kReturn: the Do* functions poll non-blocking MPI
  // against the deadline, and a timeout becomes the full message and
  // breaks the communicator. A broken communicator answers at once.
  template <typename Body>
  Status Run(int slot, CallInfo info, Body body) {
    if (broken_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(broken_mu_);
      return broken_status_;
    }
    info.non_blocking = slot == kAsync;
    if (watchdog_) watchdog_->Arm(slot, info);
    Status s = body();
    if (watchdog_) watchdog_->Disarm(slot);
    if (s.code() != Code::kTimeout) return s;
    Status t = TimeoutStatus(rt_, Describe(info), timeout_);
    {
      std::lock_guard<std::mutex> lock(broken_mu_);
      if (!broken_.load()) broken_status_ = t.Annotate("communicator broken by an earlier timeout");
      broken_.store(true, std::memory_order_release);
    }
    if (options_.on_timeout == OnTimeout::kExit) ExitForRequeue(t);
    return t;
  }

  Status DoAllReduce(const Comms& c, const void* send, void* recv, size_t count, DType t, ReduceOp op,
                     Algorithm algo) {
    BATON_RETURN_IF_ERROR(CheckOp("all_reduce", t, op));
    BATON_RETURN_IF_ERROR(CheckCount("all_reduce", count, DTypeSize(t)));
    if (count == 0) return Status::OK();
    const Deadline deadline(timeout_, blocking_);
    const DType w = WorkType(t);
    std::vector<float> widened;
    char* work = static_cast<char*>(recv);
    if (IsHalf(t)) {
      widened.resize(count);
      Widen(t, send, widened.data(), count);
      work = reinterpret_cast<char*>(widened.data());
    } else if (send != recv) {
      std::memcpy(recv, send, count * DTypeSize(t));
    }
    Status s;
    switch (algo) {
      case Algorithm::kRing: {
        std::vector<size_t> start, len;
        Segments(count, c.size, &start, &len);
        Ring ring(c.world, c.rank, c.size, w, op, options_.ring_chunk_bytes, deadline);
        s = ring.ReduceScatter(work, start, len);
        if (s.ok()) s = ring.AllGather(work, start, len);
        break;
      }
      case Algorithm::kHierarchical:
        s = Hierarchical(c, work, count, w, op, deadline);
        break;
      default:
        if (blocking_) {
          s = BATON_MPI_CHECK(
              MPI_Allreduce(MPI_IN_PLACE, work, static_cast<int>(count), MpiType(w), MpiOp(op), c.world));
        } else {
          MPI_Request req;
          s = BATON_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, work, static_cast<int>(count), MpiType(w), MpiOp(op),
                                             c.world, &req));
          if (s.ok()) s = deadline.Wait(&req, 1);
        }
    }
    if (s.code() == Code::kTimeout) Abandon(&widened);
    if (!s.ok()) return s.Annotate("all_reduce of " + std::to_string(count) + " " + std::string(DTypeName(t)));
    if (op == ReduceOp::kAvg) Scale(w, work, count, c.size);
    if (IsHalf(t)) Narrow(t, widened.data(), recv, count);
    return Status::OK();
  }

  // Reduce to local rank 0, all-reduce among the node leaders, broadcast
  // back in the node: one inter-node message per node instead of per rank.
  Status Hierarchical(const Comms& c, char* work, size_t count, DType w, ReduceOp op, const Deadline& deadline) {
    int local_rank = 0;
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_rank(c.node, &local_rank)));
    const int n = static_cast<int>(count);
    if (blocking_) {
      // Under the watchdog: MPI's blocking calls, the fastest form.
      BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Reduce(local_rank == 0 ? MPI_IN_PLACE : work,
                                                       local_rank == 0 ? work : nullptr, n, MpiType(w), MpiOp(op), 0,
                                                       c.node)));
      if (c.leaders != MPI_COMM_NULL)
        BATON_RETURN_IF_ERROR(
            BATON_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, work, n, MpiType(w), MpiOp(op), c.leaders)));
      return BATON_MPI_CHECK(MPI_Bcast(work, n, MpiType(w), 0, c.node));
    }
    MPI_Request req;
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(
        MPI_Ireduce(local_rank == 0 ? MPI_IN_PLACE : work, local_rank == 0 ? work : nullptr, n, MpiType(w),
                    MpiOp(op), 0, c.node, &req)));
    BATON_RETURN_IF_ERROR(deadline.Wait(&req, 1));
    if (c.leaders != MPI_COMM_NULL) {
      BATON_RETURN_IF_ERROR(
          BATON_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, work, n, MpiType(w), MpiOp(op), c.leaders, &req)));
      BATON_RETURN_IF_ERROR(deadline.Wait(&req, 1));
    }
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Ibcast(work, n, MpiType(w), 0, c.node, &req)));
    return deadline.Wait(&req, 1);
  }

  Status DoAllGather(const Comms& c, const void* send, void* recv, size_t count, DType t) {
    const size_t bytes = count * DTypeSize(t);
    BATON_RETURN_IF_ERROR(CheckCount("all_gather", bytes * static_cast<size_t>(c.size), 1));
    if (count == 0) return Status::OK();
    const Deadline deadline(timeout_, blocking_);
    char* out = static_cast<char*>(recv);
    if (options_.algorithm == Algorithm::kRing) {
      std::memmove(out + bytes * static_cast<size_t>(c.rank), send, bytes);
      std::vector<size_t> start(static_cast<size_t>(c.size)), len(static_cast<size_t>(c.size), bytes);
      for (int i = 0; i < c.size; ++i) start[static_cast<size_t>(i)] = bytes * static_cast<size_t>(i);
      return Ring(c.world, c.rank, c.size, DType::kU8, ReduceOp::kSum, options_.ring_chunk_bytes, deadline)
          .AllGather(out, start, len);
    }
    if (blocking_)
      return BATON_MPI_CHECK(MPI_Allgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes),
                                           MPI_BYTE, c.world));
    MPI_Request req;
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Iallgather(send, static_cast<int>(bytes), MPI_BYTE, recv,
                                                         static_cast<int>(bytes), MPI_BYTE, c.world, &req)));
    return deadline.Wait(&req, 1);
  }

  Status DoReduceScatter(const Comms& c, const void* send, void* recv, size_t count, DType t, ReduceOp op) {
    BATON_RETURN_IF_ERROR(CheckOp("reduce_scatter", t, op));
    const size_t total = count * static_cast<size_t>(c.size);
    BATON_RETURN_IF_ERROR(CheckCount("reduce_scatter", total, DTypeSize(t)));
    if (count == 0) return Status::OK();
    const Deadline deadline(timeout_, blocking_);
    const DType w = WorkType(t);
    const size_t wsize = DTypeSize(w);
    // The ring reduces in place, so it works on a copy of the whole input.
    std::vector<char> work(total * wsize);
    if (IsHalf(t))
      Widen(t, send, reinterpret_cast<float*>(work.data()), total);
    else
      std::memcpy(work.data(), send, total * wsize);
    char* mine = work.data() + count * wsize * static_cast<size_t>(c.rank);
    Status s;
    std::vector<char> out;
    if (options_.algorithm == Algorithm::kRing) {
      std::vector<size_t> start(static_cast<size_t>(c.size)), len(static_cast<size_t>(c.size), count);
      for (int i = 0; i < c.size; ++i) start[static_cast<size_t>(i)] = count * static_cast<size_t>(i);
      s = Ring(c.world, c.rank, c.size, w, op, options_.ring_chunk_bytes, deadline).ReduceScatter(work.data(), start, len);
    } else {
      out.resize(count * wsize);
      if (blocking_) {
        s = BATON_MPI_CHECK(MPI_Reduce_scatter_block(work.data(), out.data(), static_cast<int>(count), MpiType(w),
                                                     MpiOp(op), c.world));
      } else {
        MPI_Request req;
        s = BATON_MPI_CHECK(MPI_Ireduce_scatter_block(work.data(), out.data(), static_cast<int>(count), MpiType(w),
                                                      MpiOp(op), c.world, &req));
        if (s.ok()) s = deadline.Wait(&req, 1);
      }
      if (s.ok()) std::memcpy(mine, out.data(), out.size());
    }
    if (s.code() == Code::kTimeout) {
      Abandon(&work);
      Abandon(&out);
    }
    if (!s.ok()) return s.Annotate("reduce_scatter of " + std::to_string(count) + " per rank");
    if (op == ReduceOp::kAvg) Scale(w, mine, count, c.size);
    if (IsHalf(t))
      Narrow(t, reinterpret_cast<const float*>(mine), recv, count);
    else
      std::memcpy(recv, mine, count * wsize);
    return Status::OK();
  }

  Status DoBroadcast(const Comms& c, void* buffer, size_t count, DType t, int root) {
    if (root < 0 || root >= c.size)
      return Status::InvalidArgument(kComponent, "broadcast: root " + std::to_string(root) + " is not a rank of 0.." +
                                                     std::to_string(c.size - 1));
    BATON_RETURN_IF_ERROR(CheckCount("broadcast", count * DTypeSize(t), 1));
    if (count == 0) return Status::OK();
    const Deadline deadline(timeout_, blocking_);
    if (blocking_)
      return BATON_MPI_CHECK(MPI_Bcast(buffer, static_cast<int>(count * DTypeSize(t)), MPI_BYTE, root, c.world));
    MPI_Request req;
    BATON_RETURN_IF_ERROR(
        BATON_MPI_CHECK(MPI_Ibcast(buffer, static_cast<int>(count * DTypeSize(t)), MPI_BYTE, root, c.world, &req)));
    return deadline.Wait(&req, 1);
  }

  Status DoAllToAll(const Comms& c, const void* send, void* recv, size_t count, DType t) {
    const size_t bytes = count * DTypeSize(t);
    BATON_RETURN_IF_ERROR(CheckCount("all_to_all", bytes * static_cast<size_t>(c.size), 1));
    if (count == 0) return Status::OK();
    const Deadline deadline(timeout_, blocking_);
    if (blocking_)
      return BATON_MPI_CHECK(MPI_Alltoall(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes),
                                          MPI_BYTE, c.world));
    MPI_Request req;
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Ialltoall(send, static_cast<int>(bytes), MPI_BYTE, recv,
                                                        static_cast<int>(bytes), MPI_BYTE, c.world, &req)));
    return deadline.Wait(&req, 1);
  }

  Status DoBarrier(const Comms& c) {
    if (blocking_) return BATON_MPI_CHECK(MPI_Barrier(c.world));
    const Deadline deadline(timeout_, blocking_);
    MPI_Request req;
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Ibarrier(c.world, &req)));
    return deadline.Wait(&req, 1);
  }

  // Rank 0 reads the tune file and broadcasts its text, so every rank
  // chooses the same algorithm (a split choice would deadlock). A bad table
  // is not fatal: auto measures in the job instead (MakeTuner), with a
  // warning.
  void LoadTable() {
    auto share = [this](std::string* text) -> Status {
      unsigned long long n = text->size();
      BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, main_.world)));
      if (n > static_cast<unsigned long long>(INT_MAX))
        return Status::InvalidArgument(kComponent, "tune table of " + std::to_string(n) + " bytes is too large");
      text->resize(static_cast<size_t>(n));
      if (n == 0) return Status::OK();
      return BATON_MPI_CHECK(MPI_Bcast(text->data(), static_cast<int>(n), MPI_CHAR, 0, main_.world));
    };
    Status s = LoadTuneTable(DefaultTunePath(), main_.rank == 0, share, &table_);
    if (!s.ok() && main_.rank == 0) {
      BATON_LOG(kRuntime, warning) << s.message() << "; algorithm auto measures in the job instead";
    }
  }

  static Algorithm FromTuned(TunedAlgo a) {
    return a == TunedAlgo::kRing ? Algorithm::kRing
           : a == TunedAlgo::kHierarchical ? Algorithm::kHierarchical
                                           : Algorithm::kNative;
  }

  // Auto without a table entry for this job shape measures online. The
  // candidates are those that differ here: hierarchical only with several
  // nodes of which one holds several ranks, ring only with two ranks or
  // more; none (one rank) leaves auto native.
  Status MakeTuner() {
    if (table_.count(KeyOf(topology_)) != 0) return Status::OK();
    long samples = 0;
    BATON_RETURN_IF_ERROR(PositiveCountOption("auto samples", 0, "BATON_AUTO_SAMPLES", 5, &samples));
    std::vector<TunedAlgo> candidates{TunedAlgo::kNative};
    const int nodes = topology_.num_nodes();
    if (nodes > 1 && nodes < main_.size) candidates.push_back(TunedAlgo::kHierarchical);
    if (main_.size > 1) candidates.push_back(TunedAlgo::kRing);
    if (candidates.size() > 1)
      tuner_ = std::make_unique<OnlineTuner>(candidates, static_cast<int>(std::min<long>(samples, 1000)));
    return Status::OK();
  }

  // The ranks' medians per candidate, the slowest rank's (MAX), then the
  // decision; logged once per size class on rank 0.
  Status AgreeOnline(size_t bytes) {
    std::vector<double> medians = tuner_->Medians(bytes);
    const int n = static_cast<int>(medians.size());
    if (blocking_) {
      BATON_RETURN_IF_ERROR(
          BATON_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, medians.data(), n, MPI_DOUBLE, MPI_MAX, main_.world)));
    } else {
      const Deadline deadline(timeout_, blocking_);
      MPI_Request req;
      BATON_RETURN_IF_ERROR(
          BATON_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, medians.data(), n, MPI_DOUBLE, MPI_MAX, main_.world, &req)));
      Status s = deadline.Wait(&req, 1);
      if (s.code() == Code::kTimeout) Abandon(&medians);
      BATON_RETURN_IF_ERROR(s);
    }
    const TunedAlgo choice = tuner_->Decide(bytes, medians);
    if (main_.rank == 0) {
      std::string text;
      for (int i = 0; i < n; ++i)
        text += std::string(i ? ", " : "") + std::string(TunedAlgoName(tuner_->candidates()[static_cast<size_t>(i)])) +
                " " + std::to_string(static_cast<long>(medians[static_cast<size_t>(i)] * 1e6)) + " us";
      BATON_LOG(kRuntime, info) << "algorithm auto, all_reduce of " << (size_t{1} << OnlineTuner::ClassOf(bytes))
                                << "+ bytes: measured " << text << " (median of " << tuner_->samples()
                                << ", slowest rank): " << TunedAlgoName(choice);
    }
    return Status::OK();
  }

  Runtime* rt_;  // outlives the communicator: step and silent ranks for timeouts
  Topology topology_;
  CommOptions options_;
  double timeout_;  // seconds, resolved
  bool blocking_;   // kExit: MPI's blocking calls under the watchdog
  std::unique_ptr<Watchdog> watchdog_;
  TuneTable table_;
  std::unique_ptr<OnlineTuner> tuner_;  // auto without a table entry (MakeTuner)
  Comms main_, async_;
  std::unique_ptr<Worker> worker_;
  std::atomic<bool> broken_{false};
  std::mutex broken_mu_;
  Status broken_status_;
};

}  // namespace

Algorithm ChooseAlgorithm(Algorithm requested, size_t bytes, const Topology& topology, const TuneTable* table) {
  if (requested != Algorithm::kAuto) return requested;
  if (table == nullptr) return Algorithm::kNative;
  switch (LookupTuned(*table, KeyOf(topology), bytes)) {
    case TunedAlgo::kHierarchical: return Algorithm::kHierarchical;
    case TunedAlgo::kRing: return Algorithm::kRing;
    case TunedAlgo::kNative: break;
  }
  return Algorithm::kNative;
}

bool AutoAlgorithmOf(const Communicator& comm, size_t bytes, Algorithm* out) {
  const auto* m = dynamic_cast<const MpiCommunicator*>(&comm);
  if (m == nullptr) return false;
  *out = m->AutoChoice(bytes);
  return true;
}

Status CreateMpiCommunicator(Runtime& runtime, const CommOptions& options, std::unique_ptr<Communicator>* out) {
  double timeout = 0;
  BATON_RETURN_IF_ERROR(ResolveCollectiveTimeout(options.timeout, &timeout));
  auto comm = std::make_unique<MpiCommunicator>(runtime, options, timeout);
  BATON_RETURN_IF_ERROR(comm->Init(runtime));
  *out = std::move(comm);
  return Status::OK();
}

}  // namespace baton::mpi
