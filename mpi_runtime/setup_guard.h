// Blocking MPI calls of setup and teardown under a deadline: the steps of
// Runtime::Create after MPI_Init, communicator creation (the duplicates of
// the runtime's communicators, auto's table), MPI_Init and MPI_Finalize.
// Some have no non-blocking form in MPI 3 (MPI_Comm_split, MPI_Init,
// MPI_Finalize), and a rank that never comes (stopped, crashed in its own
// setup) must not hold the others for ever.
//
//   SetupGuard guard(seconds, policy, rt, "Runtime::Create");
//   Status s = guard.Run([r](const SetupGuard::Steps& step) {
//     step("MPI_Comm_split (node communicator)");
//     return BATON_MPI_CHECK(MPI_Comm_split(...));
//   });
//
// Each step starts a new deadline of `seconds` and names what waits.
//   kExit    the body runs on the caller's thread; a watchdog ends the
//            process with 75 when a step passes its deadline.
//   kReturn  the body runs on a helper thread; when a step passes its
//            deadline the caller gets Status::Timeout naming the step, and
//            the helper stays blocked in MPI (abandoned: MarkAbandoned,
//            so that MPI_Finalize is skipped). The body may then still
//            write what it writes: the caller must leave it alive (leak).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "baton/health.h"
#include "baton/status.h"

namespace baton {
class Runtime;
}

namespace baton::mpi {

class Watchdog;

class SetupGuard {
  struct Shared;  // between the caller and a kReturn helper (outlives both)

 public:
  // What the body marks its steps with; valid for as long as the body
  // runs (a kReturn helper may run on after Run returned).
  class Steps {
   public:
    void operator()(const std::string& name) const;

   private:
    friend class SetupGuard;
    std::shared_ptr<Shared> shared_;
    Watchdog* watchdog_ = nullptr;  // kExit: the body runs within Run
  };

  // `rt` (may be null) names the step and the silent ranks in a timeout;
  // `what` prefixes each step's name ("creating the communicator").
  SetupGuard(double seconds, OnTimeout policy, const Runtime* rt, std::string what);
  ~SetupGuard();
  SetupGuard(const SetupGuard&) = delete;
  SetupGuard& operator=(const SetupGuard&) = delete;

  // Runs `body` under the policy; its Status, or a Timeout.
  Status Run(std::function<Status(const Steps&)> body);

 private:
  double seconds_;
  OnTimeout policy_;
  const Runtime* rt_;
  std::shared_ptr<Shared> shared_;
  std::unique_ptr<Watchdog> watchdog_;  // kExit
};

}  // namespace baton::mpi
