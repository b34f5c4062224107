// What `baton run` does once a step of the job has ended (cli/run_command.cc):
// launch it again inside the allocation, end the job with the program's own
// status, or exit 75 once for Slurm to requeue it. Pure: the facts (srun's
// status, the nodes Slurm took away, what the ranks wrote in the event log,
// the signals baton run got, the job's state) are gathered by the caller, so
// unit tests decide every case without a cluster (tests/unit/step_verdict_test.cc).
#pragma once

#include <string>
#include <string_view>

namespace baton::launch {

// How one step ended, as baton run saw it.
struct StepEnding {
  int exit = 0;              // srun's exit status (0-255; 128+N: the step was ended by signal N)
  bool nodes_lost = false;   // a node of the step can no longer run a step (DOWN, left the allocation, ...)
  int uncaught = 0;          // "uncaught ..." failure records the step's ranks wrote: a bug or bad input
  int refused = 0;           // "refused ..." failure records: the program refused to go on at this world size
  int stops = 0;             // "stop" records: the ranks agreed on a stop (SIGTERM or the stop signal reached them)
  bool stop_asked = false;   // baton run itself got SIGTERM (preemption, requeue, scancel) or the stop signal
  bool job_ending = false;   // Slurm's job state: no longer RUNNING, or a requeue on its way
  int relaunches = 0;        // launches again inside this allocation before this step's end
  int max_restarts = 3;      // --max-restarts
};

enum class Next {
  kDone,           // exit 0: the program finished
  kProgramStatus,  // exit with the program's own status: a bug or bad input, a new run would repeat it
  kRequeue,        // exit 75 once: Slurm takes the allocation away, or it cannot absorb the failure
  kRelaunch,       // launch the step again inside the allocation (a lost node, a crashed rank, a deadline)
};

struct Verdict {
  Next next = Next::kDone;
  int exit = 0;     // baton run's exit status (kRelaunch: none)
  std::string why;  // one sentence for the job's output, naming the facts that decided
};

// Which facts win, in order: exit 0 (done); an uncaught exception (the
// program's status, 1 when srun reports the signal that ended its peers);
// a refusal of the world size (exit 75: a requeue brings the full
// allocation back); a stop asked for or Slurm ending the job (exit 75, never
// a relaunch into an allocation Slurm is taking away); a lost node, exit 75
// (a deadline, a silent peer) or a signal (a crashed or killed rank): a
// relaunch until --max-restarts, then exit 75; any other status is the
// program's own (1 an exception, 2 bad options, 3 a cap of its own).
Verdict DecideAfterStep(const StepEnding& e);

// How baton run counts a rank's failure record (StepEnding's uncaught and
// refused): by the record's "kind" field (Runtime::RecordFailure); a record
// without one (`kind` ""), written by a baton before the field existed or
// by the runtime's own exit 75, by the start of its `what` ("uncaught ...",
// "refused ..."), so that a job requeued across an upgrade is still read
// right. A kind this baton does not know is kOther.
enum class FailureRecord { kOther, kUncaught, kRefused };
FailureRecord ClassifyFailure(std::string_view kind, std::string_view what);

// Whether the step's status could be Slurm ending the job seen before Slurm's
// SIGTERM reached baton run itself (the tasks are signalled by their own
// slurmstepd, the batch script by another): a SIGTERM-ended or exit-75 step
// that lost no node and agreed no stop. baton run then waits a moment for
// the signal before it relaunches.
bool MayBeSlurmEndingTheJob(const StepEnding& e);

// Whether a line of the step's stderr (as srun passes it on, without its
// newline) can be the step's last words in the job's comment: not blank,
// not srun's own ("srun: ..."), and not Slurm's notice that the step or the
// job was cancelled ("slurmstepd-n1: error: *** STEP 115.0 ON n1 CANCELLED
// AT ... ***", unless it says "DUE TO ..."), which follows the cause (a rank's own message, such as a
// restart cap's) in an order that races with it: a fresh-clone check once
// had the notice as the last words and the reason lost.
bool IsLastWords(std::string_view line);

}  // namespace baton::launch
