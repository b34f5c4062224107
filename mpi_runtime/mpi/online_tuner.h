// Algorithm auto of the mpi backend without a tuning table for the job's
// shape: the all-reduce algorithm is measured in the job itself, per size
// class (bytes rounded down to a power of two), on the first blocking
// all-reduces of that class. Call k of a class runs candidate k mod n
// (native first, then hierarchical and ring where the topology makes them
// differ from native) until every candidate ran `samples` times; each rank
// keeps its own times, the ranks then agree on the slowest rank's median
// per candidate (one MPI_Allreduce MAX, the caller's), and the class is
// decided for the rest of the communicator's life by the same rule as
// `--tune` (PickTuned: native unless another beats it by more than 5 %).
//
// A table written by `baton bench collectives --tune` measures an idle
// moment; this measures the machine as the job finds it, on the job's own
// buffers, at the cost of n x samples calls per size class of which some
// run a slower algorithm (on the local cluster: 15 calls, under 10 ms at 8
// bytes).
//
// Every rank must make the same choice for the same call, or the ranks
// run different algorithms and deadlock: the state advances only through
// Record, which the communicator calls for blocking all-reduces in the
// caller's thread, in program order, identically on every rank (MPI
// requires all ranks to issue the same collectives in the same order).
// Non-blocking all-reduces ask Decided() at issue time and never measure.
// The communicator times each sample on a copy of the input, after the
// caller's own all-reduce ran with the class's current choice (native
// until decided), so the measurement never changes what the program
// computes (auto_algorithm.h).
//
// Pure and MPI-free (tests/unit/online_tuner_test.cc).
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "mpi_runtime/mpi/tune_table.h"

namespace baton::mpi {

class OnlineTuner {
 public:
  // `candidates` starts with kNative; `samples` >= 1 calls per candidate.
  OnlineTuner(std::vector<TunedAlgo> candidates, int samples, double margin = kTuneMargin);

  // The algorithm for the next blocking all-reduce of `bytes` (> 0), and
  // whether it is a sample to time and Record.
  TunedAlgo Next(size_t bytes, bool* measure) const;
  // This rank's seconds for the sample Next asked for. True when that was
  // the class's last sample: the caller agrees on Medians() across ranks
  // and calls Decide before the next all-reduce.
  bool Record(size_t bytes, double seconds);
  // This rank's median seconds per candidate (in candidates() order).
  std::vector<double> Medians(size_t bytes) const;
  // Decides the class from the agreed (slowest rank's) medians; returns
  // the choice.
  TunedAlgo Decide(size_t bytes, const std::vector<double>& agreed);
  // Decides the class of `bytes` as `choice` without measuring it: a
  // decision kept from an earlier run (BATON_AUTO_FILE).
  void Preset(size_t bytes, TunedAlgo choice);
  // The decided algorithm of the class, native until it is decided.
  TunedAlgo Decided(size_t bytes) const;
  bool IsDecided(size_t bytes) const;

  const std::vector<TunedAlgo>& candidates() const { return candidates_; }
  int samples() const { return samples_; }
  // The size class of `bytes`: floor(log2(bytes)), 0 for 0 and 1.
  static int ClassOf(size_t bytes);

 private:
  struct Class {
    std::vector<std::vector<double>> times;  // per candidate
    int recorded = 0;
    bool decided = false;
    TunedAlgo choice = TunedAlgo::kNative;
  };
  std::vector<TunedAlgo> candidates_;
  int samples_;
  double margin_;
  std::array<Class, 64> classes_;
};

}  // namespace baton::mpi
