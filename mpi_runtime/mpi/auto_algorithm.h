// Algorithm auto of one mpi communicator: which all-reduce algorithm a
// call of a given size runs. The tuning table's choice where the table
// lists the job's shape (tune_table.h); otherwise measured in the job
// (online_tuner.h) and agreed over the communicator's world.
//
// Every rank must choose the same algorithm for the same call, or the
// ranks run different algorithms and deadlock: the table is read by rank
// 0 and broadcast, and the online state advances only through Record,
// called for blocking all-reduces in program order on every rank.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>

#include "baton/communicator.h"
#include "baton/status.h"
#include "baton/topology.h"
#include "mpi_runtime/deadline.h"
#include "mpi_runtime/mpi/online_tuner.h"
#include "mpi_runtime/mpi/tune_table.h"

namespace baton::mpi {

class AutoAlgorithm {
 public:
  // Collective over `world` (rank `rank` of it): rank 0 reads the table
  // and broadcasts it. A bad table is not fatal: auto measures in the job
  // instead, with a warning. A bad BATON_AUTO_SAMPLES is InvalidArgument.
  static Status Create(MPI_Comm world, int rank, int size, const Topology& topology,
                       std::unique_ptr<AutoAlgorithm>* out);

  // The algorithm of the next blocking all-reduce of `bytes`, and whether
  // it is a sample of the online measurement to time and Record.
  Algorithm Next(size_t bytes, bool* measure) const;
  // This rank's seconds for the sample Next asked for. After the last
  // sample of a size class the ranks agree (one MPI_Allreduce of a few
  // doubles on `world`, under `deadline`) and the class is decided.
  Status Record(size_t bytes, double seconds, const Deadline& deadline);
  // What a call of `bytes` runs now without measuring: the table's choice,
  // the online decision once made, else native (non-blocking all-reduces,
  // the benchmark's column).
  Algorithm Current(size_t bytes) const;

 private:
  AutoAlgorithm(MPI_Comm world, int rank, const Topology& topology) : world_(world), rank_(rank), topology_(topology) {}
  void LoadTable();
  Status MakeTuner(int size);
  Status Agree(size_t bytes, const Deadline& deadline);

  MPI_Comm world_;
  int rank_;
  Topology topology_;
  TuneTable table_;
  std::unique_ptr<OnlineTuner> tuner_;  // without a table entry for this shape
};

Algorithm FromTuned(TunedAlgo a);

}  // namespace baton::mpi
