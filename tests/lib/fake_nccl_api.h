// A stand-in NcclApi for the tests of the nccl backend's control logic on
// machines without a GPU: each NCCL communicator it hands out reports
// ncclInProgress for a set number of polls of ncclCommGetAsyncError and
// then a set result (success, an error, or never: "hangs"), and every call
// is counted. Behaviour and counters live in one global (the table holds
// plain function pointers, as the real one does); Reset() before each test.
#pragma once

#include <climits>
#include <cstdlib>
#include <cstring>
#include <deque>
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
  Script script;
  int polls = 0;
  bool aborted = false, destroyed = false, finalized = false;
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
  ncclResult_t op_call_result = ncclSuccess;       // what a collective returns
  Script op = Script::Succeed();                   // the world's state after a collective
  int stream_busy_polls = 0;                       // cudaStreamQuery: NotReady this often (INT_MAX: forever)
  cudaMemoryType pointer_type = cudaMemoryTypeDevice;
  int pointer_device = 0;                          // the device of a device pointer
  bool primary_context_active = false;             // what PrimaryContextActive says of every device
  cudaError_t primary_context_error = cudaSuccess;
  int pointer_queries = 0;
  // One rank's collectives on real (host) buffers: all-reduce, all-gather,
  // reduce-scatter copy send to recv (the result of a one-rank reduction),
  // broadcast copies where send != recv, and a grouped send/recv to self
  // copies at GroupEnd. Off: collectives touch no memory.
  bool one_rank_data = false;
  int hanging_stream = -1;  // this stream (by creation order) never drains

  // Counters.
  int init_calls = 0, split_calls = 0, async_polls = 0, aborts = 0, finalizes = 0, destroys = 0;
  int collectives = 0, group_starts = 0, group_ends = 0, sends = 0, recvs = 0, stream_queries = 0;
  int last_color = 0, live_allocations = 0, memcpys = 0, streams_made = 0;
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

  std::deque<FakeComm> comms;  // stable addresses
  ncclComm_t world = nullptr;  // the last communicator made by init
  int stream_polls_left = 0;

  ncclComm_t Make(const Script& s) {
    comms.push_back(FakeComm{s});
    return reinterpret_cast<ncclComm_t>(&comms.back());
  }
  static FakeComm& Of(ncclComm_t c) { return *reinterpret_cast<FakeComm*>(c); }
};

inline FakeNccl g_fake;
inline void Reset();

namespace fake {

inline ncclResult_t GetUniqueId(ncclUniqueId* id) {
  if (g_fake.unique_id_result != ncclSuccess) return g_fake.unique_id_result;
  std::memset(id->internal, g_fake.unique_id_byte, sizeof id->internal);
  return ncclSuccess;
}
// (Each MPI rank is its own process: a multi-rank test scripts ranks apart.)
inline ncclResult_t CommInitRankConfig(ncclComm_t* comm, int, ncclUniqueId, int, ncclConfig_t* config) {
  ++g_fake.init_calls;
  if (config == nullptr || config->blocking != 0) return ncclInvalidUsage;  // baton always asks non-blocking
  const ncclResult_t rc = g_fake.init_call_result;
  if (rc != ncclSuccess && rc != ncclInProgress) {
    *comm = nullptr;  // an immediate failure makes no communicator
    return rc;
  }
  *comm = g_fake.world = g_fake.Make(g_fake.init);
  return rc;
}
inline ncclResult_t CommGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  ++g_fake.async_polls;
  FakeComm& c = FakeNccl::Of(comm);
  if (c.aborted) return ncclInvalidArgument;  // a freed communicator
  if (c.polls < c.script.in_progress_polls) {
    ++c.polls;
    *state = ncclInProgress;
  } else {
    *state = c.script.result;
  }
  return ncclSuccess;
}
inline ncclResult_t CommFinalize(ncclComm_t comm) {
  ++g_fake.finalizes;
  FakeNccl::Of(comm).finalized = true;
  return ncclSuccess;
}
inline ncclResult_t CommAbort(ncclComm_t comm) {
  ++g_fake.aborts;
  FakeNccl::Of(comm).aborted = true;
  return ncclSuccess;
}
inline ncclResult_t CommDestroy(ncclComm_t comm) {
  ++g_fake.destroys;
  FakeNccl::Of(comm).destroyed = true;
  return ncclSuccess;
}
inline ncclResult_t CommSplit(ncclComm_t, int color, int, ncclComm_t* newcomm, ncclConfig_t*) {
  ++g_fake.split_calls;
  g_fake.last_color = color;
  const ncclResult_t rc = g_fake.split_call_result;
  if (rc != ncclSuccess && rc != ncclInProgress) {
    *newcomm = nullptr;
    return rc;
  }
  *newcomm = color == NCCL_SPLIT_NOCOLOR ? nullptr : g_fake.Make(g_fake.split);
  return rc;
}
// A collective: counted; its result and the world's state after it are scripted.
inline ncclResult_t Collective(ncclComm_t comm) {
  ++g_fake.collectives;
  FakeComm& c = FakeNccl::Of(comm);
  c.script = g_fake.op;
  c.polls = 0;
  g_fake.stream_polls_left = g_fake.stream_busy_polls;
  return g_fake.op_call_result;
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
  g_fake.rooted.push_back({false, s, r, n, root});
  CopyOneRank(s, r, n, t);
  return Collective(comm);
}
// One rank: the reduction of one contribution is that contribution.
inline ncclResult_t Reduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, int root, ncclComm_t comm,
                           cudaStream_t) {
  g_fake.rooted.push_back({true, s, r, n, root});
  CopyOneRank(s, r, n, t);
  return Collective(comm);
}
inline ncclResult_t Send(const void* from, size_t n, ncclDataType_t t, int peer, ncclComm_t, cudaStream_t) {
  ++g_fake.sends;
  g_fake.send_peers.push_back(peer);
  if (g_fake.one_rank_data) g_fake.pending_sends.push_back({from, n * Width(t), peer});
  return ncclSuccess;
}
inline ncclResult_t Recv(void* to, size_t, ncclDataType_t, int peer, ncclComm_t, cudaStream_t) {
  ++g_fake.recvs;
  g_fake.recv_peers.push_back(peer);
  if (g_fake.one_rank_data) g_fake.pending_recvs.push_back({to, peer});
  return ncclSuccess;
}
inline ncclResult_t GroupStart() {
  ++g_fake.group_starts;
  return ncclSuccess;
}
inline ncclResult_t GroupEnd() {
  ++g_fake.group_ends;
  // One rank: the i-th send goes to the i-th receive (both to self).
  for (size_t i = 0; i < g_fake.pending_sends.size() && i < g_fake.pending_recvs.size(); ++i)
    if (g_fake.pending_sends[i].bytes > 0)
      std::memmove(g_fake.pending_recvs[i].first, g_fake.pending_sends[i].from, g_fake.pending_sends[i].bytes);
  g_fake.pending_sends.clear();
  g_fake.pending_recvs.clear();
  return g_fake.world ? Collective(g_fake.world) : ncclSuccess;
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
  if (g_fake.device_count_error != cudaSuccess) return g_fake.device_count_error;
  *n = g_fake.device_count;
  return cudaSuccess;
}
// The calling thread's current device, as CUDA keeps it per thread.
inline thread_local int t_current_device = 0;
inline cudaError_t SetDevice(int d) {
  if (d < 0 || d >= g_fake.device_count) return cudaErrorInvalidDevice;
  t_current_device = d;
  return cudaSuccess;
}
inline cudaError_t GetDevice(int* d) {
  *d = t_current_device;
  return cudaSuccess;
}
inline cudaError_t PrimaryContextActive(int, int* active) {
  *active = g_fake.primary_context_active ? 1 : 0;
  return g_fake.primary_context_error;
}
// Streams are numbered in the order made (the communicator's own first).
inline char g_stream_tokens[64];
inline cudaError_t StreamCreate(cudaStream_t* s) {
  *s = reinterpret_cast<cudaStream_t>(&g_stream_tokens[g_fake.streams_made++ % 64]);
  return cudaSuccess;
}
inline int StreamIndex(cudaStream_t s) { return static_cast<int>(reinterpret_cast<char*>(s) - g_stream_tokens); }
inline cudaError_t StreamDestroy(cudaStream_t) { return cudaSuccess; }
inline cudaError_t StreamQuery(cudaStream_t s) {
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
inline cudaError_t PointerGetAttributes(cudaPointerAttributes* a, const void*) {
  ++g_fake.pointer_queries;
  std::memset(a, 0, sizeof *a);
  a->type = g_fake.pointer_type;
  a->device = g_fake.pointer_device;
  return cudaSuccess;
}
// "Device" memory is host memory here; allocations are counted so that
// tests can see every one freed.
inline cudaError_t Malloc(void** p, size_t bytes) {
  *p = std::malloc(bytes > 0 ? bytes : 1);
  if (*p == nullptr) return cudaErrorMemoryAllocation;
  ++g_fake.live_allocations;
  return cudaSuccess;
}
inline cudaError_t Free(void* p) {
  if (p != nullptr) --g_fake.live_allocations;
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t Memcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  ++g_fake.memcpys;
  if (bytes > 0) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
inline const char* CudaGetErrorString(cudaError_t rc) {
  return rc == cudaErrorNoDevice ? "fake: no CUDA-capable device is detected" : "fake CUDA error";
}

}  // namespace fake

inline void Reset() {
  g_fake = FakeNccl();
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
      fake::StreamCreate, fake::StreamDestroy,
      fake::StreamQuery,    fake::StreamSynchronize, fake::PointerGetAttributes, fake::Malloc,
      fake::Free,           fake::Memcpy,            fake::CudaGetErrorString,
  };
  return api;
}

}  // namespace baton::nccl::testing
