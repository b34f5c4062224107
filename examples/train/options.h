// Command-line options of baton-train: every default in one place, every
// value checked before MPI starts, so a bad value costs no collective work
// and names itself ("--lr: '0' is not a positive number").
#pragma once

#include <cstdint>
#include <string>

namespace train {

struct Options {
  // Mode: --make-data PATH writes the data set and exits (no MPI).
  std::string make_data;
  // Data set shape for --make-data.
  uint64_t samples = 8192;
  uint32_t features = 512;
  uint32_t classes = 10;

  std::string data;            // --data: the data set file (required to train)
  int64_t steps = 200;         // optimizer steps of the whole run, counted from 1
  int64_t ckpt_every = 20;     // a checkpoint after every N-th step; 0: only at a stop and at the end
  std::string ckpt_dir;        // --ckpt-dir, else $BATON_CKPT_DIR
  // --ckpt-mode: "sync" (Save: training waits for the write) or "async"
  // (SaveAsync: the write overlaps the next steps; the stop and the last
  // step still save synchronously).
  bool ckpt_async = false;
  // --ckpt-stop-seconds: at an agreed stop, how long the save in flight may
  // take to finish before it is abandoned (async mode).
  double ckpt_stop_seconds = 30;
  uint64_t seed = 1;           // weights, data set, shuffles, dropout
  double lr = 0.01;            // SGD learning rate (momentum 0.9)
  uint32_t hidden = 1024;      // hidden units of the MLP
  // The training, not the job: the same numbers at every world size.
  // --global-batch: samples per optimizer step over all ranks; split into
  // --micro-batches equal micro-batches, each with its own dropout stream
  // and place in the data; rank r of W computes micro-batches
  // [r*M/W, (r+1)*M/W) (W must divide nothing; W <= M).
  uint32_t global_batch = 96;
  uint32_t micro_batches = 12;
  // --reduce: how the micro-batches' gradients are summed. kOrdered: in
  // micro-batch order, the same bits at every world size (FixedOrderSum);
  // kRing: each rank's micro-batches locally, then baton's ring all-reduce,
  // whose additions depend on the world size (cheaper; a run resumed at
  // another world size no longer matches an uninterrupted one).
  enum class Reduce { kOrdered, kRing } reduce = Reduce::kOrdered;
  // --compare-reduce: each step also runs the other reduction on the same
  // gradients, timed and dropped; the end prints both costs.
  bool compare_reduce = false;
  // --progress: seconds between progress lines ("step 120/1000 ..."); 0: a
  // machine-readable line after every step ("step=N loss=... time=...").
  double progress_seconds = 5;
  double step_ms = 0;          // extra CPU-busy compute per step, in milliseconds
  int max_restarts = 3;        // restarts in a row without a newer checkpoint before giving up
  // --restore-level: 0 ("auto": node-local copies when they hold the newest
  // version the shared directory still records, else the shared directory)
  // or 3 (the shared directory only): RestoreOptions::from_level.
  int restore_level = 0;
  bool help = false;
};

inline constexpr double kMomentum = 0.9;
inline constexpr float kDropout = 0.1f;  // of the hidden units, drawn from each micro-batch's RNG

// Parses argv (argv[0] skipped) and $BATON_CKPT_DIR. On failure returns
// false with *error naming the option and the value.
bool ParseOptions(int argc, char** argv, Options* o, std::string* error);

const char* Usage();

}  // namespace train
