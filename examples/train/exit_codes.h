// The exit codes of baton-train, read by baton run (examples/train.sbatch) and the tests.
#pragma once

#include <baton/health.h>

namespace train {

inline constexpr int kExitDone = 0;
// An error that running again will not fix: a damaged data file, a
// checkpoint of other options, checkpoints that exist but none restorable.
inline constexpr int kExitError = 1;
// A bad option or value, refused before any collective work.
inline constexpr int kExitUsage = 2;
// --max-restarts restarts in a row found no newer checkpoint: stop, do not
// requeue (baton run writes the reason into the job's comment).
inline constexpr int kExitRestartCap = 3;
// "Requeue me": an agreed stop with its checkpoint saved, or a failure that
// a new run may not meet (a collective deadline, a checkpoint I/O error).
inline constexpr int kExitRequeue = baton::kRequeueExitCode;  // 75

}  // namespace train
