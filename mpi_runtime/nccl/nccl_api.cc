#include "mpi_runtime/nccl/nccl_api.h"

#include <cstring>
#include <string>

namespace baton::nccl {
namespace {

// cuDeviceGet and cuDevicePrimaryCtxGetState through the runtime, resolved
// once. The driver's types are spelled as ints (CUresult, CUdevice).
using DeviceGetFn = int (*)(int* device, int ordinal);
using PrimaryCtxStateFn = int (*)(int device, unsigned int* flags, int* active);

template <typename Fn>
Fn DriverEntry(const char* symbol) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(symbol, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<Fn>(fn);
}

cudaError_t PrimaryContextActive(int ordinal, int* active) {
  static const DeviceGetFn device_get = DriverEntry<DeviceGetFn>("cuDeviceGet");
  static const PrimaryCtxStateFn state = DriverEntry<PrimaryCtxStateFn>("cuDevicePrimaryCtxGetState");
  *active = 0;
  if (device_get == nullptr || state == nullptr) return cudaErrorNotSupported;
  int device = 0;
  unsigned int flags = 0;
  if (device_get(&device, ordinal) != 0 || state(device, &flags, active) != 0) return cudaErrorInvalidDevice;
  return cudaSuccess;
}

}  // namespace

const NcclApi& RealNcclApi() {
  static const NcclApi api = {
      ncclGetUniqueId,     ncclCommInitRankConfig, ncclCommGetAsyncError, ncclCommFinalize,
      ncclCommAbort,       ncclCommDestroy,        ncclCommSplit,         ncclAllReduce,
      ncclAllGather,       ncclReduceScatter,      ncclBroadcast,         ncclReduce,            ncclSend,
      ncclRecv,            ncclGroupStart,         ncclGroupEnd,          ncclGetErrorString,
      ncclGetLastError,
      cudaGetDeviceCount,  cudaSetDevice,          cudaGetDevice,         PrimaryContextActive,
      cudaStreamCreateWithFlags, cudaStreamDestroy, cudaStreamQuery,     cudaStreamSynchronize,
      cudaStreamWaitEvent, cudaEventCreateWithFlags, cudaEventRecord,    cudaEventQuery,
      cudaEventDestroy,    cudaPointerGetAttributes, cudaMalloc,         cudaFree,
      cudaMemcpy,          cudaGetErrorString,
  };
  return api;
}

std::string CallName(const char* expr, const char* prefix) {
  std::string name(expr ? expr : "");
  if (auto paren = name.find('('); paren != std::string::npos) name.resize(paren);
  // "api.X" / "api->X": the table's field; NCCL and CUDA call it prefix + X.
  size_t cut = std::string::npos;
  if (auto dot = name.rfind('.'); dot != std::string::npos) cut = dot + 1;
  if (auto arrow = name.rfind("->"); arrow != std::string::npos && (cut == std::string::npos || arrow + 2 > cut))
    cut = arrow + 2;
  if (cut == std::string::npos) return name;
  name = name.substr(cut);
  // The one field whose name would double the prefix.
  if (name == "CudaGetErrorString") return "cudaGetErrorString";
  return prefix + name;
}

Status CheckNccl(const NcclApi& api, ncclResult_t rc, bool in_progress_ok, const char* call,
                 const char* file, int line) {
  if (rc == ncclSuccess || (in_progress_ok && rc == ncclInProgress)) return Status::OK();
  const char* text = api.GetErrorString ? api.GetErrorString(rc) : nullptr;
  std::string msg = CallName(call, "nccl") + " failed with " + std::to_string(static_cast<int>(rc)) +
                    " (" + (text ? text : "unknown NCCL error") + ") at " + file + ":" +
                    std::to_string(line);
  return NcclErrorStatus(rc, msg);
}

Status NcclErrorStatus(ncclResult_t rc, const std::string& msg) {
  switch (rc) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return Status::InvalidArgument(kComponent, msg);
    case ncclRemoteError:
    case ncclSystemError:
      return Status::IOError(kComponent, msg);
    default:
      return Status::Internal(kComponent, msg);
  }
}

Status CheckCuda(const NcclApi& api, cudaError_t rc, const char* call, const char* file, int line) {
  if (rc == cudaSuccess) return Status::OK();
  const char* text = api.CudaGetErrorString ? api.CudaGetErrorString(rc) : nullptr;
  std::string msg = CallName(call, "cuda") + " failed with " + std::to_string(static_cast<int>(rc)) +
                    " (" + (text ? text : "unknown CUDA error") + ") at " + file + ":" +
                    std::to_string(line);
  switch (rc) {
    // No GPU, no driver, or a driver too old: the resource is not there.
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
      return Status::Unavailable(kComponent, msg);
    default:
      return Status::IOError(kComponent, msg);
  }
}

}  // namespace baton::nccl
