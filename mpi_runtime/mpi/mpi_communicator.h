// The mpi backend: host buffers, over MPI, with three all-reduce
// algorithms (collectives.h, ring.h; auto: auto_algorithm.h). Blocking
// calls run on the caller's thread over one set of communicators;
// non-blocking calls run in order on a worker thread (worker.h) over a
// second set (duplicates), so the two never interleave inside MPI on one
// communicator. Deadlines (CommOptions::timeout): under kExit MPI's own
// blocking calls run under a watchdog thread (watchdog.h) that exits 75
// past the deadline; under kReturn non-blocking MPI is polled against it
// (deadline.h). A timeout breaks the communicator for good.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "baton/communicator.h"

namespace baton::mpi {

// Refuses a buffer the mpi backend cannot use (device memory) with a
// Status naming `which` buffer of `what`; OK otherwise. Built from CUDA's
// pointer attributes where baton has CUDA (nccl/buffer_location.h); null
// in a build without CUDA, where no device pointer can come from baton's
// side and the host-memory rule is documented.
using BufferCheck = std::function<Status(const void* ptr, const char* which, const std::string& what)>;

Status CreateMpiCommunicator(Runtime& runtime, const CommOptions& options, std::unique_ptr<Communicator>* out);
Status CreateMpiCommunicator(Runtime& runtime, const CommOptions& options, BufferCheck check,
                             std::unique_ptr<Communicator>* out);

// What algorithm auto of an mpi communicator runs now for an all-reduce of
// `bytes`: the table's choice, else the online measurement's once that
// size class is decided (online_tuner.h), else native. False for a
// communicator of another backend.
bool AutoAlgorithmOf(const Communicator& comm, size_t bytes, Algorithm* out);

}  // namespace baton::mpi
