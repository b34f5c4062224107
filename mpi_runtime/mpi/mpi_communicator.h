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

#include <memory>

#include "baton/communicator.h"

namespace baton::mpi {

Status CreateMpiCommunicator(Runtime& runtime, const CommOptions& options, std::unique_ptr<Communicator>* out);

// What algorithm auto of an mpi communicator runs now for an all-reduce of
// `bytes`: the table's choice, else the online measurement's once that
// size class is decided (online_tuner.h), else native. False for a
// communicator of another backend.
bool AutoAlgorithmOf(const Communicator& comm, size_t bytes, Algorithm* out);

}  // namespace baton::mpi
