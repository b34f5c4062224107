#include "mpi_runtime/nccl/buffer_location.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace baton::nccl {

Status LocateBuffer(const NcclApi& api, const void* ptr, BufferLocation* out) {
  *out = BufferLocation{};
  cudaPointerAttributes a{};
  const cudaError_t rc = api.PointerGetAttributes(&a, ptr);
  if (rc != cudaSuccess) {
    // Before CUDA 11 a host pointer unknown to CUDA was an error; it is
    // still no device memory.
    if (rc == cudaErrorInvalidValue) return Status::OK();
    return CheckCuda(api, rc, "cudaPointerGetAttributes", __FILE__, __LINE__);
  }
  if (a.type == cudaMemoryTypeHost) *out = BufferLocation{BufferLocation::kHost, -1};
  if (a.type == cudaMemoryTypeDevice) *out = BufferLocation{BufferLocation::kDevice, a.device};
  if (a.type == cudaMemoryTypeManaged) *out = BufferLocation{BufferLocation::kManaged, a.device};
  return Status::OK();
}

bool AnyPrimaryContext(const NcclApi& api) {
  int count = 0;
  if (api.GetDeviceCount(&count) != cudaSuccess) return false;
  for (int d = 0; d < count; ++d) {
    int active = 0;
    if (api.PrimaryContextActive(d, &active) == cudaSuccess && active) return true;
  }
  return false;
}

HostBufferCheck MakeHostBufferCheck(const NcclApi& api) {
  struct State {
    std::once_flag once;
    int devices = 0;                 // visible devices, counted once
    std::atomic<bool> seen{false};   // a primary context was seen active
  };
  auto state = std::make_shared<State>();
  const NcclApi* table = &api;
  return [table, state](const void* ptr, const char* which, const std::string& what) -> Status {
    if (ptr == nullptr) return Status::OK();
    // No visible device (no GPU, no driver): no device memory, ever; asked
    // once, since a failing cudaGetDeviceCount is not free.
    std::call_once(state->once, [&] {
      if (table->GetDeviceCount(&state->devices) != cudaSuccess) state->devices = 0;
    });
    if (state->devices <= 0) return Status::OK();
    // Contexts are not destroyed under a running program's feet (and a
    // pointer into a destroyed one is no device memory any more), so once
    // one is seen the probe is skipped.
    if (!state->seen.load(std::memory_order_relaxed)) {
      if (!AnyPrimaryContext(*table)) return Status::OK();
      state->seen.store(true, std::memory_order_relaxed);
    }
    BufferLocation where;
    Status s = LocateBuffer(*table, ptr, &where);
    if (!s.ok()) return s.Annotate(what + ": checking the " + which + " buffer");
    if (where.kind != BufferLocation::kDevice) return Status::OK();
    char address[32];
    std::snprintf(address, sizeof address, "%p", ptr);
    return Status::InvalidArgument(kComponent, what + ": " + which + " buffer " + address +
                                                   " is device memory (CUDA device " + std::to_string(where.device) +
                                                   "); the mpi backend takes host memory (backend nccl takes "
                                                   "device buffers)");
  };
}

}  // namespace baton::nccl
