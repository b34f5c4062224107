// What baton-train checkpoints, and how it reads it back.
//
// A version holds:
//   - the model's parameters and its momentum: replicated arrays (the same
//     on every rank), "w1", "b1", ..., "momentum.w1", ...;
//   - each micro-batch's dropout RNG: a sharded i64 array "rng" of shape
//     {micro-batches, 4}, row m micro-batch m's state, each rank holding
//     the rows of its block of micro-batches. At another world size the
//     checkpointer reshards it: every rank reads the rows of its new block,
//     so a micro-batch's stream goes on wherever it is computed;
//   - job-wide facts in the user blob (rank 0's kept): the data cursor
//     (epoch, offset), the options that decide the numbers (seed, lr,
//     hidden, global batch, micro-batches, reduction, data checksum), the
//     world size that saved it (a fact, not a condition: any world size
//     may resume) and who saved it (Slurm job id and restart count, for the
//     restart cap).
// The version's step is the number of optimizer steps done: a run that
// restores step N goes on with step N + 1.
#pragma once

#include <baton/checkpointer.h>
#include <baton/runtime.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dataset.h"
#include "micro_batches.h"
#include "mlp.h"
#include "options.h"
#include "rng.h"

namespace train {

// The Slurm job this run belongs to and how often Slurm restarted it
// (SLURM_JOB_ID, SLURM_RESTART_COUNT; "" and 0 outside Slurm).
struct RunFacts {
  std::string job;
  int restart = 0;
  static baton::Status FromEnvironment(RunFacts* out);
};

// The user blob: job-wide state and the facts a resumed run checks.
struct Blob {
  Cursor cursor;
  uint64_t seed = 0, data = 0;
  uint32_t hidden = 0, global_batch = 0, micro_batches = 0;
  std::string reduce;  // "ordered" or "ring"
  double lr = 0;
  int world = 0;  // the world size that saved it
  RunFacts saved_by;

  std::string Encode() const;
  static baton::Status Decode(const std::string& text, Blob* out);
  // The options of `now` (and its data) that differ from this blob's, as
  // "--lr 0.05 (this run: 0.1), ..."; empty when none does.
  std::string Differences(const Blob& now) const;
};

// Restarts of this job, in a row, that found no newer checkpoint than the
// one before: 0 for a first run and for a run after a restart that saved.
// `newest` is the blob of the version restored (none: nothing restored).
int RestartsWithoutProgress(const std::optional<Blob>& newest, const RunFacts& now);

class TrainState {
 public:
  // Registers the model and the dropout RNGs of this rank's micro-batches
  // (`dropout` holds share.count of them, micro-batches share.first...;
  // `micro_batches` in all) with a new Checkpointer on `dir`. Collective
  // over the runtime's world.
  static baton::Status Create(baton::Runtime& rt, const std::string& dir, Mlp* model, std::vector<Rng>* dropout,
                              Share share, uint32_t micro_batches, std::unique_ptr<TrainState>* out);

  // The newest version every rank can read, at any world size: model,
  // momentum, the RNGs of this rank's micro-batches, and *blob. *step is
  // nullopt when there is none.
  // from_level: RestoreOptions::from_level (0: any level, 3: the shared
  // directory only).
  baton::Status Restore(std::optional<int64_t>* step, Blob* blob, int from_level = 0);
  // Saves the state after step `step`: synchronously, or (async) copied
  // and written in the background, committed at the next call.
  baton::Status Save(int64_t step, const Blob& blob, bool async = false);
  // At an agreed stop: the save in flight finished or abandoned within
  // `seconds` (Checkpointer::WaitOrAbandon).
  baton::Status FinishOrAbandon(double seconds) { return ck_->WaitOrAbandon(seconds); }

  const baton::CheckpointStats& last_stats() const { return ck_->last_stats(); }
  const std::string& dir() const { return ck_->dir(); }

 private:
  TrainState() = default;
  std::unique_ptr<baton::Checkpointer> ck_;
  std::vector<Rng>* dropout_ = nullptr;
  std::vector<int64_t> rng_rows_;  // this rank's rows of "rng": the states' bits
};

}  // namespace train
