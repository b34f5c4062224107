// The mpi backend: host buffers, over MPI, with three all-reduce
// algorithms. Blocking calls run on the caller's thread over one set of
// communicators; non-blocking calls run in order on a worker thread over a
// second set (duplicates), so the two never interleave inside MPI on one
// communicator. Deadlines (CommOptions::timeout): under kExit MPI's own
// blocking calls run under a watchdog thread (watchdog.h) that exits 75
// past the deadline; under kReturn non-blocking MPI is polled against it
// (deadline.h). A timeout breaks the communicator for good.
#pragma once

#include <memory>

#include "baton/communicator.h"
#include "mpi_runtime/mpi/tune_table.h"

namespace baton::mpi {

Status CreateMpiCommunicator(Runtime& runtime, const CommOptions& options, std::unique_ptr<Communicator>* out);

// The algorithm an all-reduce of `bytes` uses when `requested` is kAuto
// and the table lists this job shape: the table's choice for the size
// (tune_table.h); without a table, kNative (a communicator then measures
// online instead: online_tuner.h). Every communicator loads the table
// once at creation, identically on all ranks.
Algorithm ChooseAlgorithm(Algorithm requested, size_t bytes, const Topology& topology,
                          const TuneTable* table = nullptr);

// What algorithm auto of an mpi communicator runs now for an all-reduce of
// `bytes`: the table's choice, else the online measurement's once that
// size class is decided (online_tuner.h), else native. False for a
// communicator of another backend.
bool AutoAlgorithmOf(const Communicator& comm, size_t bytes, Algorithm* out);

}  // namespace baton::mpi
