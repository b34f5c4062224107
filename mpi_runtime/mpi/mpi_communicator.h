// The mpi backend: host buffers, over MPI, with three all-reduce
// algorithms. Blocking calls run on the caller's thread over one set of
// communicators; non-blocking calls run in order on a worker thread over a
// second set (duplicates), so the two never interleave inside MPI on one
// communicator.
#pragma once

#include <memory>

#include "baton/communicator.h"

namespace baton::mpi {

Status CreateMpiCommunicator(Runtime& runtime, const CommOptions& options, std::unique_ptr<Communicator>* out);

// The algorithm an all-reduce of `bytes` uses when `requested` is kAuto.
// Without a tuning table this is kNative (MPI's own, which Open MPI tunes
// by size); a table from `baton bench collectives --tune` is a later part.
Algorithm ChooseAlgorithm(Algorithm requested, size_t bytes, const Topology& topology);

}  // namespace baton::mpi
