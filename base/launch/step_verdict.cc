#include "base/launch/step_verdict.h"

#include <csignal>

namespace baton::launch {
namespace {

constexpr int kRequeue = 75;  // EX_TEMPFAIL: RequeueExit=75 requeues the job

std::string Status(int exit) {
  if (exit > 128 && exit < 128 + 65) return std::to_string(exit) + " (signal " + std::to_string(exit - 128) + ")";
  return std::to_string(exit);
}

Verdict RelaunchOrRequeue(const StepEnding& e, const std::string& what) {
  if (e.relaunches >= e.max_restarts) {
    return {Next::kRequeue, kRequeue,
            what + "; " + std::to_string(e.relaunches) + " launch(es) again inside this allocation already (--max-restarts " +
                std::to_string(e.max_restarts) + "): exiting 75 to be requeued"};
  }
  return {Next::kRelaunch, 0,
          what + ": launching it again inside the allocation if enough nodes can (" + std::to_string(e.relaunches + 1) +
              " of " + std::to_string(e.max_restarts) + ")"};
}

}  // namespace

FailureRecord ClassifyFailure(std::string_view kind, std::string_view what) {
  if (kind.empty()) {
    if (what.substr(0, 9) == "uncaught ") return FailureRecord::kUncaught;
    if (what.substr(0, 8) == "refused ") return FailureRecord::kRefused;
    return FailureRecord::kOther;
  }
  if (kind == "uncaught") return FailureRecord::kUncaught;
  if (kind == "refused") return FailureRecord::kRefused;
  return FailureRecord::kOther;
}

Verdict DecideAfterStep(const StepEnding& e) {
  const std::string ended = "step ended with " + Status(e.exit);
  if (e.exit == 0) return {Next::kDone, 0, e.stop_asked ? ended + " after SIGTERM" : "done"};
  if (e.uncaught > 0) {
    // MPI_Abort(1) of the rank that raised; srun often reports the 137 or
    // 143 of the peers it ended instead.
    const int status = e.exit < 128 && e.exit != kRequeue ? e.exit : 1;
    return {Next::kProgramStatus, status,
            ended + " and the event log records " + std::to_string(e.uncaught) +
                " uncaught exception(s) (a bug or bad input, see above): exiting " + std::to_string(status) +
                ", not relaunched, not requeued"};
  }
  if (e.refused > 0) {
    return {Next::kRequeue, kRequeue,
            ended + ": the program refused to go on at this world size (its event log says why, see above): exiting 75 "
                    "to be requeued onto a full allocation, not relaunched on these nodes"};
  }
  if (e.stop_asked || e.job_ending || e.stops > 0) {
    const std::string who = e.stop_asked ? "baton run got the stop signal or SIGTERM"
                            : e.job_ending ? "Slurm is ending the job"
                                           : "the ranks agreed on a stop";
    return {Next::kRequeue, kRequeue, ended + " after a stop was asked for (" + who + "): exiting 75 to be requeued"};
  }
  if (e.nodes_lost) return RelaunchOrRequeue(e, ended + " and lost a node");
  if (e.exit == kRequeue || e.exit > 128) return RelaunchOrRequeue(e, ended);
  return {Next::kProgramStatus, e.exit,
          ended + ", the program's own status (a new run would do the same): not relaunched, not requeued"};
}

bool MayBeSlurmEndingTheJob(const StepEnding& e) {
  return !e.nodes_lost && e.stops == 0 && e.uncaught == 0 && e.refused == 0 &&
         (e.exit == kRequeue || e.exit == 128 + SIGTERM);
}

bool IsLastWords(std::string_view line) {
  if (line.find_first_not_of(" \t\r\n") == std::string_view::npos) return false;
  if (line.substr(0, 5) == "srun:") return false;
  const bool slurmstepd = line.substr(0, 10) == "slurmstepd";
  // "... CANCELLED AT <time> DUE TO TIME LIMIT ***" names a cause: kept.
  return !(slurmstepd && line.find("*** ") != std::string_view::npos &&
           line.find(" CANCELLED AT ") != std::string_view::npos && line.find(" DUE TO ") == std::string_view::npos);
}

}  // namespace baton::launch
