#include "mpi_runtime/nccl/nccl_api.h"

#include <cstring>
#include <string>

#include "mpi_runtime/nccl/nccl_library.h"

namespace baton::nccl {
namespace {

// cuDeviceGet and cuDevicePrimaryCtxGetState through the runtime, resolved
// once. The driver's types are spelled as ints (CUresult, CUdevice).
using DeviceGetFn = int (*)(int* device, int ordinal);
using PrimaryCtxStateFn = int (*)(int device, unsigned int* flags, int* active);
using EntryPointFn = cudaError_t (*)(const char* symbol, void** fn, unsigned int version,
                                     unsigned long long flags, cudaDriverEntryPointQueryResult* status);

// libcudart's cudaGetDriverEntryPointByVersion (CUDA >= 12.5), set by the
// loader before any table that uses PrimaryContextActive is handed out.
EntryPointFn entry_point = nullptr;

template <typename Fn>
Fn DriverEntry(const char* symbol) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (entry_point == nullptr || entry_point(symbol, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
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

template <typename Fn>
Status Resolve(void* handle, const std::string& path, const char* name, Fn* field) {
  void* fn = nullptr;
  BATON_RETURN_IF_ERROR(ResolveSymbol(handle, path, name, &fn));
  *field = reinterpret_cast<Fn>(fn);
  return Status::OK();
}

// The runtime's soname is that of the major version baton was compiled
// against (its structures, cudaPointerAttributes among them, are that
// version's).
LibrarySpec CudartSpec() {
  const std::string major = std::to_string(CUDART_VERSION / 1000);
  return {"the CUDA runtime", {"libcudart.so." + major, "libcudart.so"},
          {"nvidia/cu" + major + "/lib", "nvidia/cuda_runtime/lib"}};
}

LibrarySpec NcclSpec() { return {"NCCL", {"libnccl.so.2", "libnccl.so"}, {"nvidia/nccl/lib"}}; }

#define BATON_RESOLVE(field, symbol) BATON_RETURN_IF_ERROR(Resolve(handle, path, #symbol, &api->field))

Status LoadCuda(const LibrarySearch& search, NcclApi* api) {
  void* handle = nullptr;
  std::string path;
  BATON_RETURN_IF_ERROR(OpenLibrary(CudartSpec(), search, &handle, &path));
  BATON_RETURN_IF_ERROR(Resolve(handle, path, "cudaGetDriverEntryPointByVersion", &entry_point));
  BATON_RESOLVE(GetDeviceCount, cudaGetDeviceCount);
  BATON_RESOLVE(SetDevice, cudaSetDevice);
  BATON_RESOLVE(GetDevice, cudaGetDevice);
  api->PrimaryContextActive = PrimaryContextActive;
  BATON_RESOLVE(StreamCreateWithFlags, cudaStreamCreateWithFlags);
  BATON_RESOLVE(StreamDestroy, cudaStreamDestroy);
  BATON_RESOLVE(StreamQuery, cudaStreamQuery);
  BATON_RESOLVE(StreamSynchronize, cudaStreamSynchronize);
  BATON_RESOLVE(StreamWaitEvent, cudaStreamWaitEvent);
  BATON_RESOLVE(EventCreateWithFlags, cudaEventCreateWithFlags);
  BATON_RESOLVE(EventRecord, cudaEventRecord);
  BATON_RESOLVE(EventQuery, cudaEventQuery);
  BATON_RESOLVE(EventDestroy, cudaEventDestroy);
  BATON_RESOLVE(PointerGetAttributes, cudaPointerGetAttributes);
  BATON_RESOLVE(Malloc, cudaMalloc);
  BATON_RESOLVE(Free, cudaFree);
  BATON_RESOLVE(Memcpy, cudaMemcpy);
  BATON_RESOLVE(CudaGetErrorString, cudaGetErrorString);
  return Status::OK();
}

Status LoadNccl(const LibrarySearch& search, NcclApi* api) {
  void* handle = nullptr;
  std::string path;
  BATON_RETURN_IF_ERROR(OpenLibrary(NcclSpec(), search, &handle, &path));
  ncclResult_t (*get_version)(int*) = nullptr;
  BATON_RETURN_IF_ERROR(Resolve(handle, path, "ncclGetVersion", &get_version));
  int version = 0;
  if (get_version(&version) != ncclSuccess || version < NCCL_VERSION(2, 18, 0))
    return Status::Unavailable(kComponent, "backend nccl: " + path + " is NCCL version code " +
                                               std::to_string(version) + "; baton needs NCCL >= 2.18");
  BATON_RESOLVE(GetUniqueId, ncclGetUniqueId);
  BATON_RESOLVE(CommInitRankConfig, ncclCommInitRankConfig);
  BATON_RESOLVE(CommGetAsyncError, ncclCommGetAsyncError);
  BATON_RESOLVE(CommFinalize, ncclCommFinalize);
  BATON_RESOLVE(CommAbort, ncclCommAbort);
  BATON_RESOLVE(CommDestroy, ncclCommDestroy);
  BATON_RESOLVE(CommSplit, ncclCommSplit);
  BATON_RESOLVE(AllReduce, ncclAllReduce);
  BATON_RESOLVE(AllGather, ncclAllGather);
  BATON_RESOLVE(ReduceScatter, ncclReduceScatter);
  BATON_RESOLVE(Broadcast, ncclBroadcast);
  BATON_RESOLVE(Reduce, ncclReduce);
  BATON_RESOLVE(Send, ncclSend);
  BATON_RESOLVE(Recv, ncclRecv);
  BATON_RESOLVE(GroupStart, ncclGroupStart);
  BATON_RESOLVE(GroupEnd, ncclGroupEnd);
  BATON_RESOLVE(GetErrorString, ncclGetErrorString);
  BATON_RESOLVE(GetLastError, ncclGetLastError);
  return Status::OK();
}

#undef BATON_RESOLVE

// One load per process and table; the handles stay open for its life.
struct Loaded {
  Status status;
  NcclApi api{};
};

}  // namespace

Status RealCudaApi(const NcclApi** out) {
  static const Loaded* loaded = [] {
    auto* l = new Loaded;
    l->status = LoadCuda(DefaultLibrarySearch(), &l->api);
    return l;
  }();
  *out = loaded->status.ok() ? &loaded->api : nullptr;
  return loaded->status;
}

Status RealNcclApi(const NcclApi** out) {
  static const Loaded* loaded = [] {
    auto* l = new Loaded;
    const NcclApi* cuda = nullptr;
    l->status = RealCudaApi(&cuda);
    if (l->status.ok()) {
      l->api = *cuda;
      l->status = LoadNccl(DefaultLibrarySearch(), &l->api);
    }
    return l;
  }();
  *out = loaded->status.ok() ? &loaded->api : nullptr;
  return loaded->status;
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
