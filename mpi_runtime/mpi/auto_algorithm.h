// Algorithm auto of one mpi communicator: which all-reduce algorithm a
// call of a given size runs. The tuning table's choice where the table
// lists the job's shape (tune_table.h); otherwise measured in the job
// (online_tuner.h) and agreed over the communicator's world.
//
// The measurement never changes what the program computes: while a size
// class is measured, the caller's all-reduce runs native, and the
// candidate of the call is timed on a copy of the input after it (a
// second all-reduce, on a buffer kept until the class is decided).
//
// Decisions made online are kept in BATON_AUTO_FILE when it is set (rank 0
// writes each one as it is made, in the tuning table's format, under the
// job's shape, with the smallest size of its class): a later communicator
// of the same shape (a requeued run) reads them at creation and runs what
// the first run decided instead of measuring again. Classes the file does
// not list are measured and added.
//
// Every rank must choose the same algorithm for the same call, or the
// ranks run different algorithms and deadlock: files are read by rank 0
// and broadcast, and the online state advances only through Record,
// called for blocking all-reduces in program order on every rank.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

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
  // (and BATON_AUTO_FILE) and broadcasts them. A bad file is not fatal:
  // auto measures in the job instead, with a warning. A bad
  // BATON_AUTO_SAMPLES is InvalidArgument.
  static Status Create(MPI_Comm world, int rank, int size, const Topology& topology,
                       std::unique_ptr<AutoAlgorithm>* out);

  // The algorithm that computes a call of `bytes` now: the table's
  // choice, the online decision once made, else native.
  Algorithm Current(size_t bytes) const;
  // Whether the next blocking all-reduce of `bytes` (> 0) also times a
  // sample, and of which candidate.
  bool NextSample(size_t bytes, Algorithm* candidate) const;
  // A buffer of `bytes` for the sample (kept between the samples of a
  // class, freed at its decision).
  char* SampleBuffer(size_t bytes);
  // The sample's collective passed its deadline and still uses the buffer.
  void AbandonSample();
  // This rank's seconds for the sample NextSample asked for. After the
  // last sample of a size class the ranks agree (one MPI_Allreduce of a
  // few doubles on `world`, under `deadline`), the class is decided, and
  // rank 0 adds the decision to BATON_AUTO_FILE.
  Status Record(size_t bytes, double seconds, const Deadline& deadline);

 private:
  AutoAlgorithm(MPI_Comm world, int rank, const Topology& topology) : world_(world), rank_(rank), topology_(topology) {}
  Status Share(std::string* text);
  void LoadTable();
  Status MakeTuner(int size);
  void LoadDecisions();
  Status Agree(size_t bytes, const Deadline& deadline);
  void KeepDecision(size_t class_bytes, TunedAlgo choice);

  MPI_Comm world_;
  int rank_;
  Topology topology_;
  TuneTable table_;
  std::unique_ptr<OnlineTuner> tuner_;  // without a table entry for this shape
  std::string decisions_path_;          // BATON_AUTO_FILE, or empty
  std::vector<char> sample_;
};

Algorithm FromTuned(TunedAlgo a);

}  // namespace baton::mpi
