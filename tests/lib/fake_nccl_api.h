// A stand-in NcclApi for the tests of the nccl backend's control logic on
// machines without a GPU. It behaves as NCCL (2.18-2.28) does in
// non-blocking mode (config.blocking = 0), on threads as NCCL does:
//
// - ncclCommInitRankConfig writes the handle at once, returns
//   ncclInProgress and runs the init as a job on a thread of its own;
//   ncclCommSplit, ncclCommFinalize and every collective (or, inside
//   ncclGroupStart/End, the group's ncclGroupEnd) return ncclInProgress
//   with a group job attached to the communicator, on a thread of its own.
//   A job ends after a scripted number of polls (init, split, op:
//   `in_progress_polls`; Hang: never), or when the communicator is
//   aborted. The communicator answers ncclInProgress while its job runs.
// - ncclCommGetAsyncError finishes the job: joins its thread and frees it,
//   as NCCL's ncclGroupJobComplete does, and the job's result becomes the
//   communicator's state for good (a failed job: a sticky error). As in
//   NCCL, the look at the job and its freeing are not one atomic step: two
//   threads that finish the same job at once free it twice; the stand-in
//   counts that (double_frees) where NCCL would corrupt its heap, and
//   `job_free_us` widens the window.
// - A collective's kernel reaches the stream only when its job ends (so
//   an event recorded earlier does not cover it: events_before_launch).
// - Any call on a communicator whose job was not finished by
//   ncclCommGetAsyncError is refused with ncclInvalidArgument, as NCCL's
//   ncclCommEnsureReady refuses it; a collective on a communicator whose
//   state is an error gets that error, as there.
// - Asynchronous errors (ncclRemoteError, ncclSystemError: a peer that
//   died, a network failure) appear later, set by a thread of their own
//   (InjectAsyncError), whatever the program is doing.
// - A blocking communicator (config.blocking = 1) does its init and its
//   collectives in the call and returns ncclSuccess (blocking_inits).
//
// Each CUDA event completes after a set number of queries of what was
// enqueued before it was recorded (or never: a collective that hangs); an
// abort can be made to never return; every call is counted.
//
// The split's job writes the child's handle into the caller's ncclComm_t*
// only when it ends; ncclCommAbort of the parent joins it first, as NCCL's
// abort joins the init thread. A job that ends after
// its parent was aborted while the caller's handle lies on the caller's
// stack would write into a dead frame: it counts that
// (writes_into_dead_frame) instead of corrupting the test's stack.
// Behaviour and counters
// live in one global (the table holds plain function pointers, as the real
// one does); Reset() before each test.
//
// Thread-safe: the backend's watchdog and abort threads call it beside the
// test's thread. Every function takes g_fake_mu; the counters other
// threads bump are atomics, so a test reads them without the lock.
#pragma once

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "mpi_runtime/nccl/nccl_api.h"

namespace baton::nccl::testing {

// What a communicator reports while polled.
struct Script {
  int in_progress_polls = 0;          // polls answered ncclInProgress first
  ncclResult_t result = ncclSuccess;  // then this, for good
  static Script Succeed() { return {}; }
  static Script After(int polls, ncclResult_t r) { return {polls, r}; }
  static Script Hang() { return {INT_MAX, ncclSuccess}; }
};

struct FakeComm {
  explicit FakeComm(const Script& s) : script(s) {}
  // A job still running at exit (no Reset after the last test) is left.
  ~FakeComm() {
    if (job.joinable()) job.detach();
  }
  Script script;
  int polls = 0;
  std::atomic<bool> aborted{false};
  bool destroyed = false, finalized = false;
  bool blocking = false;      // made with config.blocking = 1
  int split_share = -1;  // the config's splitShare where a split made it
  int collectives = 0;   // the collectives (and groups) issued on it
  // The group job attached to this communicator (init, split, finalize,
  // a collective), on a thread of its own.
  std::thread job;
  bool job_pending = false;  // attached, not yet freed by GetAsyncError or an abort
  bool job_done = false;     // the job's thread has ended its work
  bool job_release = false;  // its polls are over: the thread ends it
  int job_threshold = 0;     // polls answered ncclInProgress first
  ncclResult_t job_result = ncclSuccess;
  int job_polls = 0;
  int job_completers = 0;    // threads freeing the job right now
};

// Whether `p` lies in the calling thread's stack.
inline bool OnThisThreadsStack(const void* p) {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return false;
  void* base = nullptr;
  size_t size = 0;
  pthread_attr_getstack(&attr, &base, &size);
  pthread_attr_destroy(&attr);
  const char* b = static_cast<const char*>(base);
  const char* q = static_cast<const char*>(p);
  return q >= b && q < b + size;
}

// A CUDA event: recorded behind what its stream had pending.
struct FakeEvent {
  int polls_left = 0;     // queries answered NotReady first
  bool never = false;     // behind a collective that hangs
  bool recorded = false;
  int stream = -1;
};

struct FakeNccl {
  // Behaviour.
  int device_count = 1;
  cudaError_t device_count_error = cudaSuccess;
  ncclResult_t unique_id_result = ncclSuccess;
  unsigned char unique_id_byte = 0x5a;   // the id's bytes, for the exchange
  ncclResult_t init_call_result = ncclInProgress;  // what ncclCommInitRankConfig returns
  Script init = Script::Succeed();                 // then its communicator's state
  ncclResult_t split_call_result = ncclInProgress;
  Script split = Script::Succeed();
  // What a collective returns: an error (refused at once, no job), else
  // (ncclSuccess or ncclInProgress) ncclInProgress with a job, as NCCL.
  ncclResult_t op_call_result = ncclInProgress;
  Script op = Script::Succeed();                   // the world's state after a collective
  // A collective keeps its stream busy this many queries (of the stream,
  // or of an event recorded behind it); INT_MAX: for ever (it hangs).
  int stream_busy_polls = 0;
  // What cudaEventQuery answers once set (a sticky error: a lost GPU).
  cudaError_t event_query_error = cudaSuccess;
  cudaMemoryType pointer_type = cudaMemoryTypeDevice;
  int pointer_device = 0;                          // the device of a device pointer
  // What cudaPointerGetAttributes returns (CUDA < 11: cudaErrorInvalidValue
  // for host memory it does not know).
  cudaError_t pointer_query_error = cudaSuccess;
  bool primary_context_active = false;             // what PrimaryContextActive says of every device
  cudaError_t primary_context_error = cudaSuccess;
  // One rank's collectives on real (host) buffers: all-reduce, all-gather,
  // reduce-scatter copy send to recv (the result of a one-rank reduction),
  // broadcast copies where send != recv, and a grouped send/recv to self
  // copies at GroupEnd. Off: collectives touch no memory.
  bool one_rank_data = false;
  int hanging_stream = -1;  // this stream (by creation order) never drains
  // How long freeing a finished job takes (its free and join), outside the
  // lock: widens the window in which a second thread frees it again.
  int job_free_us = 0;

  // Counters (atomics: other threads of the backend bump them).
  std::atomic<int> async_polls{0}, aborts{0}, stream_queries{0}, event_queries{0}, events_live{0};
  std::atomic<int> pointer_queries{0}, finalizes{0}, destroys{0};
  // Group jobs freed twice (two threads in ncclCommGetAsyncError at once);
  // events recorded on a stream while its communicator's job had not yet
  // launched the kernel; calls refused because a job was still attached.
  std::atomic<int> double_frees{0}, events_before_launch{0}, used_while_in_progress{0};
  int blocking_inits = 0;
  // The calling thread's current device at the last ncclCommInitRankConfig
  // and at every cudaPointerGetAttributes (where CUDA makes its context).
  int init_device = -1;
  std::vector<int> pointer_query_devices;
  int group_depth = 0;
  ncclComm_t group_comm = nullptr;  // the communicator the open group issued on
  std::vector<std::thread> injectors;  // InjectAsyncError's threads
  int init_calls = 0, split_calls = 0;
  int collectives = 0, group_starts = 0, group_ends = 0, sends = 0, recvs = 0;
  int last_color = 0, live_allocations = 0, memcpys = 0, streams_made = 0;
  // Splits whose job ended after the parent's abort with the handle on the
  // caller's stack (see the top of this file); and whether the last
  // split's handle was there.
  std::atomic<int> writes_into_dead_frame{0};
  bool last_split_slot_on_stack = false;
  ncclComm_t last_split_child = nullptr;  // the child the last split's job makes
  std::vector<unsigned> stream_flags;  // of every stream made, in order
  std::vector<unsigned> event_flags;   // of every event made
  struct Waited {
    int stream;  // the stream that waits (creation index; -1: another)
    int event;   // the event it waits for (creation index)
  };
  std::vector<Waited> stream_waits;     // cudaStreamWaitEvent, in call order
  std::vector<int> event_streams;       // per event: the stream it was last recorded on (-1: another)
  struct PendingSend { const void* from; size_t bytes; int peer; };
  std::vector<PendingSend> pending_sends;
  std::vector<std::pair<void*, int>> pending_recvs;
  std::vector<int> send_peers, recv_peers;
  // Every rooted collective (ncclBroadcast, ncclReduce), in call order.
  struct Rooted {
    bool reduce;
    const void* send;
    void* recv;
    size_t count;
    int root;
  };
  std::vector<Rooted> rooted;

  std::deque<FakeComm> comms;    // stable addresses
  std::deque<FakeEvent> events;  // stable addresses
  ncclComm_t world = nullptr;    // the last communicator made by init
  int stream_polls_left = 0;

  FakeNccl() = default;
  // An injector still sleeping at exit (no Reset after the last test) is left.
  ~FakeNccl() {
    for (auto& t : injectors)
      if (t.joinable()) t.detach();
  }
  FakeNccl(const FakeNccl&) = delete;
  FakeNccl& operator=(const FakeNccl&) = delete;

  ncclComm_t Make(const Script& s) {
    comms.emplace_back(s);
    return reinterpret_cast<ncclComm_t>(&comms.back());
  }
  static FakeComm& Of(ncclComm_t c) { return *reinterpret_cast<FakeComm*>(c); }
};

inline FakeNccl g_fake;
inline std::recursive_mutex g_fake_mu;
// While true, ncclCommAbort does not return (a kernel waiting for a dead
// peer); tests set it back to false to let the abort's thread end.
inline std::atomic<bool> g_abort_hangs{false};

namespace fake {

using Lock = std::lock_guard<std::recursive_mutex>;

inline ncclResult_t GetUniqueId(ncclUniqueId* id) {
  Lock lock(g_fake_mu);
  if (g_fake.unique_id_result != ncclSuccess) return g_fake.unique_id_result;
  std::memset(id->internal, g_fake.unique_id_byte, sizeof id->internal);
  return ncclSuccess;
}
// Attaches a group job to `c` (g_fake_mu held): its thread waits until the
// job's polls are over (job_release, set by the GetAsyncError that frees
// it) or the communicator is aborted, then runs `end(aborted)` under the
// lock; what that returns is the job's result.
template <typename End>
inline void StartJob(FakeComm* c, int polls, End end) {
  c->job_pending = true;
  c->job_done = false;
  c->job_release = false;
  c->job_threshold = polls;
  c->job_polls = 0;
  c->job = std::thread([c, end] {
    for (;;) {
      {
        Lock job_lock(g_fake_mu);
        if (c->aborted.load() || c->job_release) {
          c->job_result = end(c->aborted.load());
          c->job_done = true;
          return;
        }
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  });
}

// (Each MPI rank is its own process: a multi-rank test scripts ranks apart.)
inline thread_local int t_current_device = 0;  // the calling thread's, as CUDA keeps it
inline ncclResult_t CommInitRankConfig(ncclComm_t* comm, int, ncclUniqueId, int, ncclConfig_t* config) {
  Lock lock(g_fake_mu);
  ++g_fake.init_calls;
  g_fake.init_device = t_current_device;
  if (config == nullptr) return ncclInvalidArgument;
  const ncclResult_t rc = g_fake.init_call_result;
  if (rc != ncclSuccess && rc != ncclInProgress) {
    *comm = nullptr;  // an immediate failure makes no communicator
    return rc;
  }
  if (config->blocking != 0) {
    // Blocking: the init runs in the call; not the backend's world.
    ++g_fake.blocking_inits;
    *comm = g_fake.Make(Script::Succeed());
    FakeNccl::Of(*comm).blocking = true;
    return ncclSuccess;
  }
  if (rc == ncclSuccess) {  // scripted as done in the call
    *comm = g_fake.world = g_fake.Make(g_fake.init);
    return rc;
  }
  // NCCL writes the handle at once and runs the init on a thread.
  *comm = g_fake.world = g_fake.Make(Script::Succeed());
  const ncclResult_t result = g_fake.init.result;
  StartJob(&FakeNccl::Of(*comm), g_fake.init.in_progress_polls, [result](bool aborted) {
    return aborted ? ncclInternalError : result;
  });
  return ncclInProgress;
}
// NCCL's: the state, and a finished group job joined and freed (by
// ncclGroupJobComplete, after a look that is not atomic with it).
inline ncclResult_t CommGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  std::unique_lock<std::recursive_mutex> lock(g_fake_mu);
  ++g_fake.async_polls;
  FakeComm& c = FakeNccl::Of(comm);
  if (c.aborted) return ncclInvalidArgument;  // a freed communicator
  if (c.job_pending) {
    if (++c.job_polls <= c.job_threshold) {
      *state = ncclInProgress;
      return ncclSuccess;
    }
    c.job_release = true;
    if (++c.job_completers > 1) ++g_fake.double_frees;  // NCCL: a second pthread_join and free
    std::thread job = std::move(c.job);
    const int free_us = g_fake.job_free_us;
    lock.unlock();
    if (job.joinable()) job.join();
    if (free_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(free_us));
    lock.lock();
    --c.job_completers;
    c.job_pending = false;
    // A failed job leaves its error in the communicator for good.
    if (c.job_result != ncclSuccess) {
      c.script = Script::After(0, c.job_result);
      c.polls = 0;
    }
  }
  if (c.polls < c.script.in_progress_polls) {
    ++c.polls;
    *state = ncclInProgress;
  } else {
    *state = c.script.result;
  }
  return ncclSuccess;
}
// NCCL's ncclCommEnsureReady: a communicator whose job was not freed yet
// takes no call (g_fake_mu held).
inline bool Busy(FakeComm& c) {
  if (!c.job_pending) return false;
  ++g_fake.used_while_in_progress;
  return true;
}
inline ncclResult_t CommFinalize(ncclComm_t comm) {
  Lock lock(g_fake_mu);
  ++g_fake.finalizes;
  FakeComm& c = FakeNccl::Of(comm);
  if (Busy(c)) return ncclInvalidArgument;
  c.finalized = true;
  if (c.blocking) return ncclSuccess;
  StartJob(&c, 0, [](bool aborted) { return aborted ? ncclInternalError : ncclSuccess; });
  return ncclInProgress;
}
inline ncclResult_t CommAbort(ncclComm_t comm) {
  std::thread job;
  {
    Lock lock(g_fake_mu);
    ++g_fake.aborts;
    FakeComm& c = FakeNccl::Of(comm);
    c.aborted = true;
    if (c.job_pending) {
      job = std::move(c.job);
      c.job_pending = false;
    }
  }
  // NCCL's abort joins a running init or split job first.
  if (job.joinable()) job.join();
  while (g_abort_hangs.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return ncclSuccess;
}
inline ncclResult_t CommDestroy(ncclComm_t comm) {
  Lock lock(g_fake_mu);
  ++g_fake.destroys;
  FakeComm& c = FakeNccl::Of(comm);
  if (Busy(c)) return ncclInvalidArgument;
  c.destroyed = true;
  return ncclSuccess;
}
inline ncclResult_t CommSplit(ncclComm_t parent, int color, int, ncclComm_t* newcomm, ncclConfig_t* config) {
  Lock lock(g_fake_mu);
  ++g_fake.split_calls;
  g_fake.last_color = color;
  if (config == nullptr || config->blocking != 0) return ncclInvalidUsage;  // baton always asks non-blocking
  const ncclResult_t rc = g_fake.split_call_result;
  if (rc != ncclSuccess && rc != ncclInProgress) {
    *newcomm = nullptr;
    return rc;
  }
  FakeComm& p = FakeNccl::Of(parent);
  if (p.job_pending) return ncclInvalidUsage;  // NCCL: the parent is still in progress
  // The child: once its job ended, it reports the script's result.
  const Script script = g_fake.split;
  ncclComm_t child = nullptr;
  if (color != NCCL_SPLIT_NOCOLOR) {
    child = g_fake.Make(Script::After(0, script.result));
    FakeNccl::Of(child).split_share = config->splitShare;
  }
  g_fake.last_split_child = child;
  const bool on_stack = OnThisThreadsStack(newcomm);
  g_fake.last_split_slot_on_stack = on_stack;
  const ncclResult_t result = script.result;
  StartJob(&p, script.in_progress_polls, [newcomm, child, on_stack, result](bool aborted) {
    if (aborted && on_stack)
      ++g_fake.writes_into_dead_frame;  // the caller gave up: its frame is gone
    else
      *newcomm = child;
    return aborted ? ncclInternalError : result;
  });
  return ncclInProgress;
}
// An operation issued on `c` (g_fake_mu held): refused while a job is
// attached; a scripted immediate error; else, on a non-blocking
// communicator, a group job that launches the kernel (the stream stays
// busy stream_busy_polls queries from then) and ends with op's result.
inline ncclResult_t Issue(FakeComm& c) {
  ++c.collectives;
  if (Busy(c)) return ncclInvalidArgument;
  // NCCL's ncclCommEnsureReady again: an error in the communicator's state
  // (a peer's death seen by a proxy thread, a failed job) is what every
  // later call returns; nothing is enqueued.
  if (c.polls >= c.script.in_progress_polls && c.script.result != ncclSuccess && c.script.result != ncclInProgress)
    return c.script.result;
  const ncclResult_t rc = g_fake.op_call_result;
  const Script op = g_fake.op;
  if (rc != ncclSuccess && rc != ncclInProgress) {
    c.script = op;  // what the communicator's state says after the refusal
    c.polls = 0;
    return rc;
  }
  if (c.blocking) {
    g_fake.stream_polls_left = g_fake.stream_busy_polls;
    if (op.result != ncclSuccess) c.script = Script::After(0, op.result);
    return op.result;
  }
  StartJob(&c, op.in_progress_polls, [op](bool aborted) {
    if (aborted) return ncclInternalError;
    g_fake.stream_polls_left = g_fake.stream_busy_polls;
    return op.result;
  });
  return ncclInProgress;
}
// A collective: counted; inside a group it only joins the group (NCCL
// launches the group at ncclGroupEnd).
inline ncclResult_t Collective(ncclComm_t comm) {
  Lock lock(g_fake_mu);
  ++g_fake.collectives;
  FakeComm& c = FakeNccl::Of(comm);
  if (g_fake.group_depth > 0) {
    if (Busy(c)) return ncclInvalidArgument;
    g_fake.group_comm = comm;
    return ncclSuccess;
  }
  return Issue(c);
}
// A thread that sets `rc` (ncclRemoteError: a peer died; ncclSystemError)
// as `comm`'s asynchronous error after `delay`, as NCCL's proxy and
// network threads do, whatever the program is doing then.
inline void InjectAsyncError(ncclComm_t comm, ncclResult_t rc, std::chrono::milliseconds delay) {
  Lock lock(g_fake_mu);
  g_fake.injectors.emplace_back([comm, rc, delay] {
    std::this_thread::sleep_for(delay);
    Lock inject_lock(g_fake_mu);
    FakeComm& c = FakeNccl::Of(comm);
    c.script = Script::After(0, rc);
    c.polls = 0;
  });
}
inline size_t Width(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 4;
  }
}
inline void CopyOneRank(const void* send, void* recv, size_t count, ncclDataType_t t) {
  if (g_fake.one_rank_data && send != recv && count > 0) std::memmove(recv, send, count * Width(t));
}
inline ncclResult_t AllReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, ncclComm_t comm,
                              cudaStream_t) {
  CopyOneRank(s, r, n, t);
  return Collective(comm);
}
inline ncclResult_t AllGather(const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t comm, cudaStream_t) {
  CopyOneRank(s, r, n, t);
  return Collective(comm);
}
inline ncclResult_t ReduceScatter(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, ncclComm_t comm,
                                  cudaStream_t) {
  CopyOneRank(s, r, n, t);
  return Collective(comm);
}
inline ncclResult_t Broadcast(const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t comm,
                              cudaStream_t) {
  {
    Lock lock(g_fake_mu);
    g_fake.rooted.push_back({false, s, r, n, root});
  }
  CopyOneRank(s, r, n, t);
  return Collective(comm);
}
// One rank: the reduction of one contribution is that contribution.
inline ncclResult_t Reduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, int root, ncclComm_t comm,
                           cudaStream_t) {
  {
    Lock lock(g_fake_mu);
    g_fake.rooted.push_back({true, s, r, n, root});
  }
  CopyOneRank(s, r, n, t);
  return Collective(comm);
}
inline ncclResult_t Send(const void* from, size_t n, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t) {
  Lock lock(g_fake_mu);
  if (g_fake.group_depth > 0) g_fake.group_comm = comm;
  ++g_fake.sends;
  g_fake.send_peers.push_back(peer);
  if (g_fake.one_rank_data) g_fake.pending_sends.push_back({from, n * Width(t), peer});
  return ncclSuccess;
}
inline ncclResult_t Recv(void* to, size_t, ncclDataType_t, int peer, ncclComm_t comm, cudaStream_t) {
  Lock lock(g_fake_mu);
  if (g_fake.group_depth > 0) g_fake.group_comm = comm;
  ++g_fake.recvs;
  g_fake.recv_peers.push_back(peer);
  if (g_fake.one_rank_data) g_fake.pending_recvs.push_back({to, peer});
  return ncclSuccess;
}
inline ncclResult_t GroupStart() {
  Lock lock(g_fake_mu);
  ++g_fake.group_starts;
  ++g_fake.group_depth;
  return ncclSuccess;
}
inline ncclResult_t GroupEnd() {
  Lock lock(g_fake_mu);
  ++g_fake.group_ends;
  // One rank: the i-th send goes to the i-th receive (both to self).
  for (size_t i = 0; i < g_fake.pending_sends.size() && i < g_fake.pending_recvs.size(); ++i)
    if (g_fake.pending_sends[i].bytes > 0)
      std::memmove(g_fake.pending_recvs[i].first, g_fake.pending_sends[i].from, g_fake.pending_sends[i].bytes);
  g_fake.pending_sends.clear();
  g_fake.pending_recvs.clear();
  if (g_fake.group_depth > 0) --g_fake.group_depth;
  if (g_fake.group_depth > 0) return ncclSuccess;
  // The group is launched as one job on the communicator it issued on.
  ncclComm_t comm = g_fake.group_comm != nullptr ? g_fake.group_comm : g_fake.world;
  g_fake.group_comm = nullptr;
  if (comm == nullptr) return ncclSuccess;
  ++g_fake.collectives;
  return Issue(FakeNccl::Of(comm));
}
inline const char* GetErrorString(ncclResult_t rc) {
  switch (rc) {
    case ncclSuccess: return "no error";
    case ncclSystemError: return "fake system error";
    case ncclRemoteError: return "fake remote error";
    case ncclInternalError: return "fake internal error";
    case ncclInvalidArgument: return "fake invalid argument";
    case ncclInvalidUsage: return "fake invalid usage";
    default: return "fake other error";
  }
}
inline const char* GetLastError(ncclComm_t) { return "fake detail"; }

inline cudaError_t GetDeviceCount(int* n) {
  Lock lock(g_fake_mu);
  if (g_fake.device_count_error != cudaSuccess) return g_fake.device_count_error;
  *n = g_fake.device_count;
  return cudaSuccess;
}
inline cudaError_t SetDevice(int d) {
  Lock lock(g_fake_mu);
  if (d < 0 || d >= g_fake.device_count) return cudaErrorInvalidDevice;
  t_current_device = d;
  return cudaSuccess;
}
inline cudaError_t GetDevice(int* d) {
  *d = t_current_device;
  return cudaSuccess;
}
inline cudaError_t PrimaryContextActive(int, int* active) {
  Lock lock(g_fake_mu);
  *active = g_fake.primary_context_active ? 1 : 0;
  return g_fake.primary_context_error;
}
// Streams are numbered in the order made (the communicator's own first).
inline char g_stream_tokens[64];
inline int StreamIndex(cudaStream_t s) {
  const char* p = reinterpret_cast<const char*>(s);
  return p >= g_stream_tokens && p < g_stream_tokens + 64 ? static_cast<int>(p - g_stream_tokens) : -1;
}
inline cudaError_t StreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
  Lock lock(g_fake_mu);
  g_fake.stream_flags.push_back(flags);
  *s = reinterpret_cast<cudaStream_t>(&g_stream_tokens[g_fake.streams_made++ % 64]);
  return cudaSuccess;
}
inline cudaError_t StreamDestroy(cudaStream_t) { return cudaSuccess; }
inline cudaError_t StreamQuery(cudaStream_t s) {
  Lock lock(g_fake_mu);
  ++g_fake.stream_queries;
  if (g_fake.hanging_stream >= 0 && StreamIndex(s) == g_fake.hanging_stream) return cudaErrorNotReady;
  if (g_fake.stream_polls_left == INT_MAX) return cudaErrorNotReady;
  if (g_fake.stream_polls_left > 0) {
    --g_fake.stream_polls_left;
    return cudaErrorNotReady;
  }
  return cudaSuccess;
}
inline cudaError_t StreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline int EventIndex(cudaEvent_t e) {
  for (size_t i = 0; i < g_fake.events.size(); ++i)
    if (reinterpret_cast<cudaEvent_t>(&g_fake.events[i]) == e) return static_cast<int>(i);
  return -1;
}
inline cudaError_t StreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
  Lock lock(g_fake_mu);
  g_fake.stream_waits.push_back({StreamIndex(s), EventIndex(e)});
  return cudaSuccess;
}
inline cudaError_t EventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
  Lock lock(g_fake_mu);
  g_fake.events.emplace_back();
  g_fake.event_flags.push_back(flags);
  g_fake.event_streams.push_back(-1);
  ++g_fake.events_live;
  *e = reinterpret_cast<cudaEvent_t>(&g_fake.events.back());
  return cudaSuccess;
}
// Behind what the stream has pending: the last collective's busy queries
// (or for ever), or nothing on a stream that is not the backend's.
inline cudaError_t EventRecord(cudaEvent_t e, cudaStream_t s) {
  Lock lock(g_fake_mu);
  FakeEvent& ev = *reinterpret_cast<FakeEvent*>(e);
  ev.recorded = true;
  ev.stream = StreamIndex(s);
  g_fake.event_streams[static_cast<size_t>(EventIndex(e))] = ev.stream;
  const bool ours = ev.stream >= 0;
  if (ours && g_fake.world != nullptr) {
    const FakeComm& w = FakeNccl::Of(g_fake.world);
    if (w.job_pending && !w.job_done) ++g_fake.events_before_launch;  // the kernel is not on the stream yet
  }
  ev.never = ours && (g_fake.stream_polls_left == INT_MAX || ev.stream == g_fake.hanging_stream);
  ev.polls_left = ours && !ev.never ? g_fake.stream_polls_left : 0;
  return cudaSuccess;
}
inline cudaError_t EventQuery(cudaEvent_t e) {
  Lock lock(g_fake_mu);
  ++g_fake.event_queries;
  if (g_fake.event_query_error != cudaSuccess) return g_fake.event_query_error;
  FakeEvent& ev = *reinterpret_cast<FakeEvent*>(e);
  if (ev.never) return cudaErrorNotReady;
  if (ev.polls_left > 0) {
    --ev.polls_left;
    return cudaErrorNotReady;
  }
  return cudaSuccess;
}
inline cudaError_t EventDestroy(cudaEvent_t) {
  --g_fake.events_live;
  return cudaSuccess;
}
inline cudaError_t PointerGetAttributes(cudaPointerAttributes* a, const void*) {
  Lock lock(g_fake_mu);
  ++g_fake.pointer_queries;
  g_fake.pointer_query_devices.push_back(t_current_device);
  if (g_fake.pointer_query_error != cudaSuccess) return g_fake.pointer_query_error;
  std::memset(a, 0, sizeof *a);
  a->type = g_fake.pointer_type;
  a->device = g_fake.pointer_device;
  return cudaSuccess;
}
// "Device" memory is host memory here; allocations are counted so that
// tests can see every one freed. Live blocks stay listed in a "device
// heap": what a broken communicator leaves on purpose (NcclState does not
// cudaFree under a kernel that may still run) is device memory, reclaimed
// with the process, so LeakSanitizer must not report it as a host leak.
inline std::set<void*>& DeviceHeap() {
  static auto* heap = new std::set<void*>();  // never destroyed: read until exit
  return *heap;
}
inline cudaError_t Malloc(void** p, size_t bytes) {
  Lock lock(g_fake_mu);
  *p = std::malloc(bytes > 0 ? bytes : 1);
  if (*p == nullptr) return cudaErrorMemoryAllocation;
  ++g_fake.live_allocations;
  DeviceHeap().insert(*p);
  return cudaSuccess;
}
inline cudaError_t Free(void* p) {
  Lock lock(g_fake_mu);
  if (p != nullptr) --g_fake.live_allocations;
  DeviceHeap().erase(p);
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t Memcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  Lock lock(g_fake_mu);
  ++g_fake.memcpys;
  if (bytes > 0) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
inline const char* CudaGetErrorString(cudaError_t rc) {
  return rc == cudaErrorNoDevice ? "fake: no CUDA-capable device is detected" : "fake CUDA error";
}

}  // namespace fake

using fake::InjectAsyncError;

// A fresh stand-in (no thread of a previous test's communicator may still
// call it: they are joined when it is destroyed; an abort thread left
// hanging only reads g_abort_hangs).
inline void Reset() {
  // Split jobs still running end as aborted (outside the lock: they take it).
  std::vector<std::thread> jobs;
  {
    std::lock_guard<std::recursive_mutex> lock(g_fake_mu);
    for (auto& c : g_fake.comms)
      if (c.job.joinable()) {
        c.aborted = true;
        jobs.push_back(std::move(c.job));
      }
  }
  for (auto& j : jobs) j.join();
  std::vector<std::thread> injectors;
  {
    std::lock_guard<std::recursive_mutex> lock(g_fake_mu);
    injectors.swap(g_fake.injectors);
  }
  for (auto& j : injectors) j.join();
  std::lock_guard<std::recursive_mutex> lock(g_fake_mu);
  g_fake.~FakeNccl();
  new (&g_fake) FakeNccl();
  fake::t_current_device = 0;
}

inline const NcclApi& FakeNcclApi() {
  static const NcclApi api = {
      fake::GetUniqueId, fake::CommInitRankConfig, fake::CommGetAsyncError, fake::CommFinalize,
      fake::CommAbort,   fake::CommDestroy,        fake::CommSplit,         fake::AllReduce,
      fake::AllGather,   fake::ReduceScatter,      fake::Broadcast,         fake::Reduce,            fake::Send,
      fake::Recv,        fake::GroupStart,         fake::GroupEnd,          fake::GetErrorString,
      fake::GetLastError,
      fake::GetDeviceCount, fake::SetDevice, fake::GetDevice, fake::PrimaryContextActive,
      fake::StreamCreateWithFlags, fake::StreamDestroy, fake::StreamQuery, fake::StreamSynchronize,
      fake::StreamWaitEvent, fake::EventCreateWithFlags, fake::EventRecord, fake::EventQuery,
      fake::EventDestroy, fake::PointerGetAttributes, fake::Malloc, fake::Free, fake::Memcpy,
      fake::CudaGetErrorString,
  };
  return api;
}

}  // namespace baton::nccl::testing
