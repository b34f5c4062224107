#pragma once
// The arithmetic of `baton report` (docs/events.md, "The report"): from the
// records of every rank and launch, the job's wall time, productive step
// time, steps computed twice, checkpoint stall, goodput, and what each
// interruption cost. MPI-free, pure.
#include <cstdint>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "base/events/event_reader.h"

namespace baton::events {

// One launch of the job (one srun or mpirun, or one Slurm restart).
struct LaunchSummary {
  std::string key;
  std::string job;
  int restart = 0;
  int world = 0;  // ranks that wrote a start record (or the world they gave)
  std::vector<std::string> hosts;
  double start = 0;  // the first start record (the runtime was up on that rank)
  double end = 0;    // the last record of any rank
  int rank = -1;     // the rank whose steps and saves are counted (most step records)
  int64_t steps = 0, first_step = -1, last_step = -1;
  int saves = 0;
  double stall = 0;  // its saves' blocking time
  bool restored = false;
  int64_t restored_step = -1;  // -1: started from nothing
  int restore_level = 0;
  double restore_seconds = 0;  // from the first restore call's start to the last one's end, before the first step
  int restore_records = 0;      // restore records in that span (Python's restore(state): two a pass)
  // "end", "stop", "failure" from the ranks' logs; where the logs just stop,
  // the batch script's step_end record: "node failure", "exit N"; else "unknown".
  std::string ended;
};

struct FailureSeen {
  int rank = -1;
  double t = 0;
  std::string what;
};

// From the last step ended before an interruption to the first step ended
// after it, in five consecutive parts (they add up to total). The program's
// set-up between its start and its restore (imports, building the model,
// sharding it: seconds for an FSDP2 program) is a part of its own, so that
// "restore" is the restore's own time, as the launch's restore_seconds is.
struct Interruption {
  // "failure", "stop", "end" or "unknown" from the ranks' logs; "node
  // failure" when the batch script saw a node of the step lost, "exit N"
  // when the logs say nothing and srun ended with N.
  std::string cause;
  size_t before = 0, after = 0;  // indexes into launches
  int64_t last_step = -1;        // the last step ended before it
  int64_t resumed_step = -1;     // the first step ended after it
  double last_progress = 0;      // when that last step ended
  double detected = 0;           // the first failure or stop record (else the launch's last record)
  double started = 0;            // the next launch's start
  double restore_started = 0;    // its first restore call's start (started when none)
  double restored = 0;           // its restore's end (started when none)
  double resumed = 0;            // its first step's end
  double detection() const { return detected - last_progress; }
  double launch() const { return started - detected; }
  double setup() const { return restore_started - started; }
  double restore() const { return restored - restore_started; }
  double first_step() const { return resumed - restored; }
  double total() const { return resumed - last_progress; }
  std::vector<FailureSeen> failures;  // each rank's failure record of the launch before
  // From the batch script's step_end record (docs/events.md), when it wrote one.
  std::optional<int> step_exit;  // srun's exit status
  std::string srun_said;         // srun's error lines
  std::vector<std::pair<std::string, std::string>> lost;  // nodes of the step that cannot run a step: host, why
  // "n2 (DOWN+NOT_RESPONDING); srun exit 137: srun: error: Node failure on n2", or "".
  std::string Detail() const;
};

struct Report {
  double start = 0, end = 0;
  double wall = 0;        // end - start
  double productive = 0;  // the compute time of each distinct step, its last computation
  int64_t steps = 0;      // distinct steps
  int64_t computed = 0;   // step computations in all launches
  int64_t computed_twice = 0;  // computed - steps
  int64_t first_step = -1, last_step = -1;
  double stall = 0;  // checkpoint stall, every launch's counted rank
  int saves = 0;
  double goodput = 0;  // productive / wall
  std::vector<LaunchSummary> launches;
  std::vector<Interruption> interruptions;
};

// `events` in any order. An empty list gives an empty report (wall 0).
Report Analyze(const std::vector<Event>& events);

}  // namespace baton::events
