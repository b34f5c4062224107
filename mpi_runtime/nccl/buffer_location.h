// Where a buffer lives, as CUDA knows it, asked without making a CUDA
// context in a process that has none (a context costs hundreds of MB of
// device memory and tenths of a second, and an mpi-backend job on a GPU
// node may never touch CUDA): device pointers exist only where a primary
// context does, so cudaPointerGetAttributes is asked only once one is
// active (PrimaryContextActive), and never without a visible device.
//
// The mpi backend uses this to refuse device memory with a Status instead
// of handing it to memcpy and MPI (a segfault); the nccl backend's check
// (device buffers only, NcclCommunicator::CheckBuffer) asks LocateBuffer
// too. MPI-free.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "baton/status.h"
#include "mpi_runtime/nccl/nccl_api.h"

namespace baton::nccl {

struct BufferLocation {
  enum Kind { kUnregistered, kHost, kDevice, kManaged } kind = kUnregistered;
  int device = -1;  // kDevice, kManaged: CUDA's device of the allocation
};

// Plain host memory CUDA does not know is kUnregistered; registered
// (pinned) host memory kHost; cudaMalloc'd memory kDevice;
// cudaMallocManaged kManaged.
// Asks cudaPointerGetAttributes, which makes a context where none exists:
// call it where one does (AnyPrimaryContext).
Status LocateBuffer(const NcclApi& api, const void* ptr, BufferLocation* out);

// Whether any visible device's primary context exists (no CUDA, no
// device, or a driver without the call: false).
bool AnyPrimaryContext(const NcclApi& api);

// The mpi backend's check: OK for host (and managed) memory, and without
// asking CUDA anything while no context exists; InvalidArgument naming
// `which` buffer of `what`, its address and its device for device memory.
// Once a context was seen, every later call asks cudaPointerGetAttributes
// (about a microsecond). Thread-safe.
using HostBufferCheck = std::function<Status(const void* ptr, const char* which, const std::string& what)>;
HostBufferCheck MakeHostBufferCheck(const NcclApi& api);

}  // namespace baton::nccl
