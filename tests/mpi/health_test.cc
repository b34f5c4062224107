// Keeping a job from hanging (baton/health.h): collective deadlines,
// heartbeats, stragglers, agreed stop, requeue outside a job. Every test
// makes its own Runtime with short deadlines and intervals (0.2 s beats,
// 2 s deadlines) and generous margins; each is bounded by the suite's
// timeout, and nothing waits without a deadline. Run at 3 ranks
// (tests/mpi/health-np3.sh); "the odd rank" is the last one.
#include <mpi.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "baton/communicator.h"
#include "baton/runtime.h"

namespace baton {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kInterval = 0.2;  // heartbeat interval of these tests, s
constexpr double kDeadline = 2;    // collective deadline of these tests, s

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
void Sleep(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }
void WorldBarrier() { MPI_Barrier(MPI_COMM_WORLD); }

RuntimeOptions Fast() {
  RuntimeOptions o;
  o.heartbeat_interval = kInterval;
  o.collective_timeout = kDeadline;
  o.on_timeout = OnTimeout::kReturn;
  return o;
}

std::unique_ptr<Runtime> Make(const RuntimeOptions& o) {
  std::unique_ptr<Runtime> rt;
  Status s = Runtime::Create(nullptr, nullptr, o, &rt);
  EXPECT_TRUE(s.ok()) << s;
  return rt;
}

// ---- deadlines ------------------------------------------------------------

class SkippedCollective : public ::testing::TestWithParam<Algorithm> {};

TEST_P(SkippedCollective, OthersGetTheTimeoutNamingIt) {
  auto rt = Make(Fast());
  ASSERT_TRUE(rt);
  CommOptions co;
  co.backend = Backend::kMpi;
  co.algorithm = GetParam();
  co.timeout = kDeadline;
  co.on_timeout = OnTimeout::kReturn;
  std::unique_ptr<Communicator> comm;
  Status s = CreateCommunicator(*rt, co, &comm);
  ASSERT_TRUE(s.ok()) << s;
  const int late = rt->size() - 1;
  std::vector<float> v(262144, 1.0f);  // 1 MiB
  rt->BeginStep(41);
  if (rt->rank() != late) {
    const auto t0 = Clock::now();
    s = comm->AllReduce(v.data(), v.data(), v.size(), DType::kF32, ReduceOp::kSum);
    const double took = Since(t0);
    EXPECT_EQ(s.code(), Code::kTimeout) << s;
    EXPECT_GE(took, kDeadline - 0.05);
    EXPECT_LE(took, kDeadline + 3) << "the deadline was " << kDeadline << " s";
    EXPECT_NE(s.message().find("all_reduce of 1048576 bytes (f32 sum) at step 41 timed out after 2 s; "
                               "ranks not answering heartbeats: none"),
              std::string::npos)
        << s;
    std::printf("[rank %d] %s: timeout after %.2f s: %s\n", rt->rank(), std::string(AlgorithmName(GetParam())).c_str(),
                took, s.ToString().c_str());
    // Broken from now on: the next call answers at once, with the same error.
    const auto t1 = Clock::now();
    Status again = comm->Barrier();
    EXPECT_EQ(again.code(), Code::kTimeout) << again;
    EXPECT_NE(again.message().find("broken by an earlier timeout"), std::string::npos) << again;
    EXPECT_LT(Since(t1), 0.5);
    WorldBarrier();  // tells the late rank that every other rank gave up
  } else {
    // Comes after the others gave up (an event, not a sleep: their barrier
    // on MPI_COMM_WORLD); whatever MPI then does with the late call (native
    // completes it, the ring's later messages never come) is bounded by
    // its own deadline.
    WorldBarrier();
    const auto t0 = Clock::now();
    s = comm->AllReduce(v.data(), v.data(), v.size(), DType::kF32, ReduceOp::kSum);
    EXPECT_TRUE(s.ok() || s.code() == Code::kTimeout) << s;
    EXPECT_LE(Since(t0), kDeadline + 3);
  }
  WorldBarrier();
}

INSTANTIATE_TEST_SUITE_P(Mpi, SkippedCollective,
                         ::testing::Values(Algorithm::kNative, Algorithm::kRing, Algorithm::kHierarchical),
                         [](const ::testing::TestParamInfo<Algorithm>& i) {
                           return std::string(AlgorithmName(i.param));
                         });

TEST(Deadline, BadEnvironmentValueIsNamed) {
  auto rt = Make(Fast());
  ASSERT_TRUE(rt);
  setenv("BATON_COLLECTIVE_TIMEOUT", "ten", 1);
  CommOptions co;
  co.backend = Backend::kMpi;
  std::unique_ptr<Communicator> comm;
  Status s = CreateCommunicator(*rt, co, &comm);
  unsetenv("BATON_COLLECTIVE_TIMEOUT");
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("BATON_COLLECTIVE_TIMEOUT='ten'"), std::string::npos) << s;
  WorldBarrier();
}

TEST(Deadline, FastCollectivesStillWork) {
  auto rt = Make(Fast());
  ASSERT_TRUE(rt);
  CommOptions co;
  co.backend = Backend::kMpi;
  co.timeout = kDeadline;
  std::unique_ptr<Communicator> comm;
  ASSERT_TRUE(CreateCommunicator(*rt, co, &comm).ok());
  for (int i = 0; i < 100; ++i) {
    int x = 1, sum = 0;
    ASSERT_TRUE(comm->AllReduce(&x, &sum, 1, DType::kI32, ReduceOp::kSum).ok());
    ASSERT_EQ(sum, rt->size());
  }
  std::unique_ptr<Request> req;
  ASSERT_TRUE(comm->IBarrier(&req).ok());
  EXPECT_TRUE(req->Wait().ok());
  WorldBarrier();
}

// ---- heartbeats -------------------------------------------------------------

// Stops `victim` with SIGSTOP for kStopped seconds (a child process does it,
// so the stopped rank needs nobody's help to continue); the others must
// name it within two intervals plus a margin for a loaded 2-core machine
// (where the victim's fork and the observers' heartbeat threads can each be
// late by a second) and see it come back.
class StoppedRank : public ::testing::TestWithParam<bool> {};

TEST_P(StoppedRank, HeartbeatsNameIt) {
  auto rt = Make(Fast());
  ASSERT_TRUE(rt);
  const int victim = GetParam() ? 0 : rt->size() - 1;
  constexpr double kStopped = 5.0, kMargin = 2.5;
  WorldBarrier();
  if (rt->rank() == victim) {
    const pid_t child = fork();
    if (child == 0) {  // only async-signal-safe calls in the child
      const pid_t parent = getppid();
      kill(parent, SIGSTOP);
      struct timespec ts = {static_cast<time_t>(kStopped), 0};
      nanosleep(&ts, nullptr);
      kill(parent, SIGCONT);
      _exit(0);
    }
    ASSERT_GT(child, 0);
    int status = 0;
    waitpid(child, &status, 0);  // returns once we were continued and the child ended
  } else {
    const auto t0 = Clock::now();
    std::vector<int> silent;
    while (Since(t0) < kStopped - 0.5) {
      silent = rt->silent_ranks();
      if (std::count(silent.begin(), silent.end(), victim)) break;
      Sleep(0.01);
    }
    const double noticed = Since(t0);
    EXPECT_EQ(silent, std::vector<int>{victim}) << "after " << noticed << " s";
    EXPECT_LE(noticed, 2 * kInterval + kMargin) << "interval " << kInterval << " s";
    const std::string described = rt->DescribeSilentRanks();
    EXPECT_EQ(described, std::to_string(victim) + " (" + rt->host(victim) + ")");
    std::printf("[rank %d] rank %d stopped: named after %.2f s (interval %.1f s): %s\n", rt->rank(), victim, noticed,
                kInterval, described.c_str());
    // And no longer once it runs again.
    const auto t1 = Clock::now();
    while (!rt->silent_ranks().empty() && Since(t1) < kStopped + 5) Sleep(0.02);
    EXPECT_TRUE(rt->silent_ranks().empty()) << rt->DescribeSilentRanks();
  }
  WorldBarrier();
}

INSTANTIATE_TEST_SUITE_P(Heartbeat, StoppedRank, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return std::string(i.param ? "RankZero" : "LastRank");
                         });

// A rank is silent after two intervals without a beat: with 1 s beats a
// loaded machine may delay a heartbeat thread by up to a second without a
// false alarm. Looked at every 0.1 s for four intervals.
TEST(Heartbeat, NobodySilentWhenAllAreWell) {
  RuntimeOptions o = Fast();
  o.heartbeat_interval = 1.0;
  auto rt = Make(o);
  ASSERT_TRUE(rt);
  const auto t0 = Clock::now();
  while (Since(t0) < 4 * o.heartbeat_interval) {
    ASSERT_TRUE(rt->silent_ranks().empty()) << rt->DescribeSilentRanks() << " after " << Since(t0) << " s";
    Sleep(0.1);
  }
  EXPECT_EQ(rt->DescribeSilentRanks(), "none");
  WorldBarrier();
}

// ---- stragglers -------------------------------------------------------------

TEST(Stragglers, SlowRankIsReportedWithItsFigures) {
  // The slow rank takes 0.4 s a step, the others 0.03 s; a straggler is
  // 20% and 0.1 s over the median, so a fast rank delayed by a loaded
  // machine (by less than 0.1 s) is not one.
  RuntimeOptions o = Fast();
  o.straggler_every = 5;
  o.straggler_threshold = 0.2;
  o.straggler_min_seconds = 0.1;
  auto rt = Make(o);
  ASSERT_TRUE(rt);
  const int slow = rt->size() - 1;
  for (int step = 0; step < 5; ++step) {
    if (step == 4) {
      EXPECT_EQ(rt->stragglers().step, -1) << "gathered before step 5";
    }
    rt->BeginStep(step);
    Sleep(rt->rank() == slow ? 0.4 : 0.03);
    Status s = rt->EndStep();
    ASSERT_TRUE(s.ok()) << s;
  }
  const StragglerReport r = rt->stragglers();
  EXPECT_EQ(r.step, 4);
  ASSERT_EQ(r.step_seconds.size(), static_cast<size_t>(rt->size()));
  EXPECT_GE(r.step_seconds[static_cast<size_t>(slow)], 0.39);
  EXPECT_EQ(r.stragglers, std::vector<int>{slow});
  EXPECT_LT(r.median_seconds, 0.39) << "the median is a fast rank's step";
  WorldBarrier();
}

// ---- agreed stop --------------------------------------------------------------

struct StopCase {
  const char* env;  // BATON_STOP_SIGNAL, or null
  int signal;
  long check_every;
  int expected_step;
  const char* name;
};

class AgreedStop : public ::testing::TestWithParam<StopCase> {};

// One rank gets the signal at step 5; every rank must stop at the same step.
TEST_P(AgreedStop, SignalToOneRankStopsAllAtTheSameStep) {
  const StopCase c = GetParam();
  if (c.env) setenv("BATON_STOP_SIGNAL", c.env, 1);
  RuntimeOptions o = Fast();
  o.stop_check_every = c.check_every;
  auto rt = Make(o);
  if (c.env) unsetenv("BATON_STOP_SIGNAL");
  ASSERT_TRUE(rt);
  const int signalled = 1 % rt->size();
  int stopped_at = -1;
  for (int step = 0; step < 50; ++step) {
    if (rt->rank() == signalled && step == 5) raise(c.signal);
    if (rt->should_stop()) {
      stopped_at = step;
      break;
    }
  }
  EXPECT_EQ(Runtime::stop_signal_received(), rt->rank() == signalled);
  std::vector<int> all(static_cast<size_t>(rt->size()));
  MPI_Allgather(&stopped_at, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
  for (int r = 0; r < rt->size(); ++r) {
    EXPECT_EQ(all[static_cast<size_t>(r)], c.expected_step) << "rank " << r << " stopped at another step";
  }
  EXPECT_TRUE(rt->should_stop()) << "an agreed stop stays agreed";
  WorldBarrier();
}

// A signal raised before the call of step 5 is acted on at that call, on
// every rank (the flag is exchanged as it is at the call).
INSTANTIATE_TEST_SUITE_P(
    Signals, AgreedStop,
    ::testing::Values(StopCase{nullptr, SIGUSR2, 1, 5, "Usr2"}, StopCase{nullptr, SIGTERM, 1, 5, "Term"},
                      StopCase{"USR1", SIGUSR1, 1, 5, "Usr1FromEnvironment"},
                      // exchanges at calls 4, 8, 12 (steps 3, 7, 11): the flag
                      // of step 5 is known at step 7
                      StopCase{nullptr, SIGUSR2, 4, 7, "EveryFourthCall"}),
    [](const ::testing::TestParamInfo<StopCase>& i) { return std::string(i.param.name); });

// The handler may run on any thread (here one of the test's own, where
// raise() delivers it); the training thread reads the flag. The stop is
// acted on at the first should_stop() that starts after the signal: the
// test knows that call by the flag (Runtime::stop_signal_received() before
// and after each call), not by clocks. A signal that lands during a call
// may be acted on by that call or by the next. The delay from the signal to
// the agreed stop is printed: about one step (20 ms here) plus the
// exchange, bounded by 2 s for a loaded machine.
TEST(AgreedStop, SignalOnAnotherThreadStopsAtTheFirstCallAfterIt) {
  auto rt = Make(Fast());
  ASSERT_TRUE(rt);
  const int signalled = 1 % rt->size();
  constexpr double kStep = 0.02;
  std::atomic<double> raised_at{-1};  // seconds since t0, on the signalled rank
  WorldBarrier();
  const auto t0 = Clock::now();
  std::thread sender;
  if (rt->rank() == signalled) {
    sender = std::thread([&] {
      Sleep(0.105);  // inside step 5, between two calls
      raise(SIGUSR2);
      raised_at = Since(t0);
    });
  }
  int stopped_at = -1, seen_before = -1, seen_after = -1;  // first call with the flag set before / after it
  double stopped_after = -1;
  for (int step = 0; step < 200; ++step) {
    Sleep(kStep);
    if (seen_before < 0 && Runtime::stop_signal_received()) seen_before = step;
    const bool stop = rt->should_stop();
    if (seen_after < 0 && Runtime::stop_signal_received()) seen_after = step;
    if (stop) {
      stopped_at = step;
      stopped_after = Since(t0);
      break;
    }
  }
  if (sender.joinable()) sender.join();
  std::vector<int> all(static_cast<size_t>(rt->size()));
  MPI_Allgather(&stopped_at, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
  for (int r = 0; r < rt->size(); ++r) EXPECT_EQ(all[static_cast<size_t>(r)], all[0]) << "rank " << r;
  if (rt->rank() == signalled) {
    EXPECT_TRUE(Runtime::stop_signal_received());
    ASSERT_GE(seen_after, 0) << "the signal was never seen";
    EXPECT_GE(stopped_at, seen_after) << "stopped before the signal";
    if (seen_before >= 0) {
      EXPECT_LE(stopped_at, seen_before) << "a call that started after the signal went on";
    }
    const double delay = stopped_after - raised_at.load();
    std::printf("[rank %d] signal at %.3f s, agreed stop at step %d, %.1f ms after it (steps of %.0f ms)\n",
                rt->rank(), raised_at.load(), stopped_at, delay * 1e3, kStep * 1e3);
    EXPECT_LE(delay, kStep + 2.0) << "more than a step and the exchange, with 2 s for a loaded machine";
  }
  WorldBarrier();
}

TEST(AgreedStop, NoSignalNoStop) {
  auto rt = Make(Fast());
  ASSERT_TRUE(rt);
  for (int step = 0; step < 200; ++step) ASSERT_FALSE(rt->should_stop()) << "step " << step;
  WorldBarrier();
}

TEST(Options, BadEnvironmentValuesAreNamed) {
  for (const char* var : {"BATON_HEARTBEAT_INTERVAL=-1", "BATON_STRAGGLER_EVERY=often", "BATON_STOP_SIGNAL=KILL",
                          "BATON_STRAGGLER_MIN_SECONDS=soon"}) {
    std::string kv(var);
    const std::string name = kv.substr(0, kv.find('=')), value = kv.substr(kv.find('=') + 1);
    setenv(name.c_str(), value.c_str(), 1);
    std::unique_ptr<Runtime> rt;
    Status s = Runtime::Create(nullptr, nullptr, {}, &rt);
    unsetenv(name.c_str());
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << var << ": " << s;
    EXPECT_NE(s.message().find(name + "='" + value + "'"), std::string::npos) << s;
  }
  WorldBarrier();
}

// A test's own Runtime beside a shared one: the stop handlers are shared.
TEST(Options, TwoRuntimesAtOnceShareTheStopHandlers) {
  auto first = Make(Fast());
  auto second = Make(Fast());
  ASSERT_TRUE(first && second);
  RuntimeOptions other = Fast();
  other.stop_signal = SIGUSR1;
  std::unique_ptr<Runtime> third;
  Status s = Runtime::Create(nullptr, nullptr, other, &third);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << "a different stop signal: " << s;
  second.reset();
  struct sigaction now;
  sigaction(SIGUSR2, nullptr, &now);
  EXPECT_NE(now.sa_handler, SIG_DFL) << "the first Runtime's handler went with the second";
  first.reset();
  sigaction(SIGUSR2, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL) << "the handler was not restored";
  WorldBarrier();
}

// ---- requeue ------------------------------------------------------------------

TEST(Requeue, OutsideASlurmJobIsAClearError) {
  auto rt = Make(Fast());
  ASSERT_TRUE(rt);
  const char* job = std::getenv("SLURM_JOB_ID");
  const std::string saved = job ? job : "";
  unsetenv("SLURM_JOB_ID");
  unsetenv("SLURM_JOBID");
  Status s = rt->Requeue();
  if (job) setenv("SLURM_JOB_ID", saved.c_str(), 1);
  EXPECT_EQ(s.code(), Code::kUnavailable) << s;
  EXPECT_NE(s.message().find("not in a Slurm job (SLURM_JOB_ID is not set)"), std::string::npos) << s;
  WorldBarrier();
}

}  // namespace
}  // namespace baton
