// The NCCL and CUDA runtime calls of the nccl backend, as a table of
// function pointers, and the check helpers that turn their results into a
// baton::Status.
//
// Every call the backend makes goes through a NcclApi, never straight to
// NCCL or CUDA, so that tests on a machine without a GPU can drive the
// init / poll / deadline / abort logic with a stand-in table whose
// functions succeed, fail, stay in progress or hang. RealNcclApi() is the
// table of the real libraries, loaded with dlopen when first asked for
// (nccl_library.h: where they are looked for), so that libbaton.so links
// neither and loads on nodes without CUDA. The pointers have the exact
// signatures of the real functions; the one exception is
// PrimaryContextActive, baton's wrapper of the driver's
// cuDevicePrimaryCtxGetState (reached through
// cudaGetDriverEntryPointByVersion, CUDA >= 12.5, so that libbaton needs
// no libcuda either).
//
// This header and nccl_api.cc need no MPI (tests/gpu builds them alone).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "baton/status.h"

namespace baton::nccl {

// The component of every Status made here: the runtime's, as for MPI
// (log::kRuntime; spelled out so that this file needs no Boost.Log).
inline constexpr const char* kComponent = "runtime";

struct NcclApi {
  // NCCL
  ncclResult_t (*GetUniqueId)(ncclUniqueId* id);
  ncclResult_t (*CommInitRankConfig)(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                     ncclConfig_t* config);
  ncclResult_t (*CommGetAsyncError)(ncclComm_t comm, ncclResult_t* async_error);
  ncclResult_t (*CommFinalize)(ncclComm_t comm);
  ncclResult_t (*CommAbort)(ncclComm_t comm);
  ncclResult_t (*CommDestroy)(ncclComm_t comm);
  ncclResult_t (*CommSplit)(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                            ncclConfig_t* config);
  ncclResult_t (*AllReduce)(const void* send, void* recv, size_t count, ncclDataType_t dtype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
  ncclResult_t (*AllGather)(const void* send, void* recv, size_t count, ncclDataType_t dtype,
                            ncclComm_t comm, cudaStream_t stream);
  ncclResult_t (*ReduceScatter)(const void* send, void* recv, size_t count, ncclDataType_t dtype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
  ncclResult_t (*Broadcast)(const void* send, void* recv, size_t count, ncclDataType_t dtype,
                            int root, ncclComm_t comm, cudaStream_t stream);
  ncclResult_t (*Reduce)(const void* send, void* recv, size_t count, ncclDataType_t dtype, ncclRedOp_t op,
                         int root, ncclComm_t comm, cudaStream_t stream);
  ncclResult_t (*Send)(const void* send, size_t count, ncclDataType_t dtype, int peer,
                       ncclComm_t comm, cudaStream_t stream);
  ncclResult_t (*Recv)(void* recv, size_t count, ncclDataType_t dtype, int peer, ncclComm_t comm,
                       cudaStream_t stream);
  ncclResult_t (*GroupStart)();
  ncclResult_t (*GroupEnd)();
  const char* (*GetErrorString)(ncclResult_t result);
  // NCCL's own description of the last error on `comm` (may be empty).
  const char* (*GetLastError)(ncclComm_t comm);

  // CUDA runtime
  cudaError_t (*GetDeviceCount)(int* count);
  cudaError_t (*SetDevice)(int device);
  cudaError_t (*GetDevice)(int* device);
  // *active: whether `device`'s primary context exists, without making it
  // (cudaErrorNotSupported where the driver does not offer the call).
  cudaError_t (*PrimaryContextActive)(int device, int* active);
  cudaError_t (*StreamCreateWithFlags)(cudaStream_t* stream, unsigned int flags);
  cudaError_t (*StreamDestroy)(cudaStream_t stream);
  cudaError_t (*StreamQuery)(cudaStream_t stream);
  cudaError_t (*StreamSynchronize)(cudaStream_t stream);
  cudaError_t (*StreamWaitEvent)(cudaStream_t stream, cudaEvent_t event, unsigned int flags);
  cudaError_t (*EventCreateWithFlags)(cudaEvent_t* event, unsigned int flags);
  cudaError_t (*EventRecord)(cudaEvent_t event, cudaStream_t stream);
  cudaError_t (*EventQuery)(cudaEvent_t event);
  cudaError_t (*EventDestroy)(cudaEvent_t event);
  cudaError_t (*PointerGetAttributes)(cudaPointerAttributes* attributes, const void* ptr);
  cudaError_t (*Malloc)(void** ptr, size_t bytes);
  cudaError_t (*Free)(void* ptr);
  cudaError_t (*Memcpy)(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
  const char* (*CudaGetErrorString)(cudaError_t error);
};

// The table of the real NCCL and CUDA runtime, loaded on the first call
// (thread-safe; the outcome is kept for the process). Unavailable, naming
// the library, every path tried and the loader's reason, when one is
// missing or too old; *out is then null.
Status RealNcclApi(const NcclApi** out);
// The CUDA runtime's part of that table alone (its NCCL fields null): for
// asking where a buffer lives without loading NCCL.
Status RealCudaApi(const NcclApi** out);

// ncclSuccess -> OK. ncclInProgress is OK only where the caller says a
// non-blocking call may return it (`in_progress_ok`). Otherwise a Status
// naming the call (up to its argument list), NCCL's error string and
// file:line: IOError for a remote or system error, InvalidArgument for an
// invalid argument or usage, Internal for the rest.
Status CheckNccl(const NcclApi& api, ncclResult_t rc, bool in_progress_ok, const char* call,
                 const char* file, int line);
// The Status for a failed NCCL result `rc` with message `msg`, by kind:
// IOError for a remote or system error, InvalidArgument for an invalid
// argument or usage, Internal for the rest. Shared by CheckNccl and the
// asynchronous errors the communicator polls.
Status NcclErrorStatus(ncclResult_t rc, const std::string& msg);
// cudaSuccess -> OK; else Unavailable for "no device / no driver" errors,
// IOError otherwise, naming the call, CUDA's error string and file:line.
Status CheckCuda(const NcclApi& api, cudaError_t rc, const char* call, const char* file, int line);

// The name NCCL or CUDA give a call, for messages: with prefix "nccl",
// "api.CommInitRankConfig(&c, n, id, r, &cfg)" -> "ncclCommInitRankConfig";
// a plain "ncclGetUniqueId(&id)" stays "ncclGetUniqueId".
std::string CallName(const char* expr, const char* prefix);

}  // namespace baton::nccl

// Status s = BATON_NCCL_CHECK(api, api.AllReduce(...));
#define BATON_NCCL_CHECK(api, call) \
  ::baton::nccl::CheckNccl((api), (call), false, #call, __FILE__, __LINE__)
// For the non-blocking calls, where ncclInProgress means "started".
#define BATON_NCCL_CHECK_ASYNC(api, call) \
  ::baton::nccl::CheckNccl((api), (call), true, #call, __FILE__, __LINE__)
#define BATON_CUDA_CHECK(api, call) \
  ::baton::nccl::CheckCuda((api), (call), #call, __FILE__, __LINE__)
