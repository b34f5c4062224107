// What `baton run` does after a step ended (base/launch/step_verdict.h):
// every fact that decides, and the order in which they win (issue 47: the
// old loop relaunched a job Slurm was preempting; a refusal of the world
// size was reported as a bug).
#include "base/launch/step_verdict.h"

#include <gtest/gtest.h>

#include "base/events/event_reader.h"

namespace baton::launch {
namespace {

StepEnding Ended(int exit) {
  StepEnding e;
  e.exit = exit;
  return e;
}

TEST(StepVerdict, ExitZeroIsDone) {
  const Verdict v = DecideAfterStep(Ended(0));
  EXPECT_EQ(v.next, Next::kDone);
  EXPECT_EQ(v.exit, 0);
}

TEST(StepVerdict, AnUncaughtExceptionEndsTheJobWithOneEvenWhenSrunReportsThePeersSignal) {
  for (int exit : {137, 143, 75, 1}) {
    StepEnding e = Ended(exit);
    e.uncaught = 1;
    e.nodes_lost = true;  // a bug is a bug even when a node went with it
    e.relaunches = 0;
    const Verdict v = DecideAfterStep(e);
    EXPECT_EQ(v.next, Next::kProgramStatus) << exit;
    EXPECT_EQ(v.exit, 1) << exit;
    EXPECT_NE(v.why.find("1 uncaught exception(s)"), std::string::npos) << v.why;
  }
  StepEnding e = Ended(2);
  e.uncaught = 3;
  EXPECT_EQ(DecideAfterStep(e).exit, 2);
}

TEST(StepVerdict, TheProgramsOwnStatusIsNeitherRelaunchedNorRequeued) {
  for (int exit : {1, 2, 3, 64}) {
    const Verdict v = DecideAfterStep(Ended(exit));
    EXPECT_EQ(v.next, Next::kProgramStatus) << exit;
    EXPECT_EQ(v.exit, exit);
    EXPECT_NE(v.why.find("not relaunched, not requeued"), std::string::npos) << v.why;
  }
}

TEST(StepVerdict, ARefusedWorldSizeIsRequeuedNotRelaunchedNorABug) {
  for (int exit : {75, 137}) {
    StepEnding e = Ended(exit);
    e.refused = 2;
    const Verdict v = DecideAfterStep(e);
    EXPECT_EQ(v.next, Next::kRequeue);
    EXPECT_EQ(v.exit, 75);
    EXPECT_NE(v.why.find("refused to go on at this world size"), std::string::npos) << v.why;
  }
}

TEST(StepVerdict, AStopOrSlurmEndingTheJobIsExit75NeverARelaunch) {
  StepEnding signal = Ended(143), ending = Ended(75), agreed = Ended(75);
  signal.stop_asked = true;
  ending.job_ending = true;
  agreed.stops = 3;
  for (StepEnding e : {signal, ending, agreed}) {
    e.nodes_lost = true;  // a node lost while Slurm takes the job away: still not relaunched
    const Verdict v = DecideAfterStep(e);
    EXPECT_EQ(v.next, Next::kRequeue) << v.why;
    EXPECT_EQ(v.exit, 75);
    EXPECT_NE(v.why.find("after a stop was asked for"), std::string::npos) << v.why;
  }
  EXPECT_NE(DecideAfterStep(signal).why.find("baton run got"), std::string::npos);
  EXPECT_NE(DecideAfterStep(ending).why.find("Slurm is ending the job"), std::string::npos);
  EXPECT_NE(DecideAfterStep(agreed).why.find("the ranks agreed on a stop"), std::string::npos);
}

TEST(StepVerdict, ALostNodeADeadlineOrASignalIsRelaunchedUntilTheCap) {
  StepEnding lost = Ended(1), deadline = Ended(75), killed = Ended(137);
  lost.nodes_lost = true;  // srun's 1 for a node failure is not the program's
  for (StepEnding e : {lost, deadline, killed}) {
    e.max_restarts = 2;
    e.relaunches = 1;
    Verdict v = DecideAfterStep(e);
    EXPECT_EQ(v.next, Next::kRelaunch) << v.why;
    EXPECT_NE(v.why.find("(2 of 2)"), std::string::npos) << v.why;
    e.relaunches = 2;
    v = DecideAfterStep(e);
    EXPECT_EQ(v.next, Next::kRequeue) << v.why;
    EXPECT_EQ(v.exit, 75);
    EXPECT_NE(v.why.find("(--max-restarts 2): exiting 75 to be requeued"), std::string::npos) << v.why;
  }
  EXPECT_NE(DecideAfterStep(killed).why.find("137 (signal 9)"), std::string::npos);
}

TEST(StepVerdict, MaxRestartsZeroRequeuesEveryFailure) {
  StepEnding e = Ended(137);
  e.max_restarts = 0;
  EXPECT_EQ(DecideAfterStep(e).next, Next::kRequeue);
}

TEST(StepVerdict, OnlyASilentSigtermOrExit75MayBeSlurmEndingTheJob) {
  EXPECT_TRUE(MayBeSlurmEndingTheJob(Ended(143)));
  EXPECT_TRUE(MayBeSlurmEndingTheJob(Ended(75)));
  EXPECT_FALSE(MayBeSlurmEndingTheJob(Ended(137)));
  StepEnding lost = Ended(143), stopped = Ended(75);
  lost.nodes_lost = true;
  stopped.stops = 1;  // already decided: a stop
  EXPECT_FALSE(MayBeSlurmEndingTheJob(lost));
  EXPECT_FALSE(MayBeSlurmEndingTheJob(stopped));
}

// The record's kind decides, not its text: a program's own failure whose
// message happens to start "uncaught " or "refused " is neither (it was read
// as a bug, or as a refusal to be requeued, while `what` was matched).
FailureRecord Classified(const std::string& line) {
  events::Event e;
  EXPECT_TRUE(events::ParseEventLine(line, &e).ok()) << line;
  return ClassifyFailure(e.failure_kind, e.what);
}

TEST(StepVerdict, AFailureRecordIsCountedByItsKind) {
  EXPECT_EQ(Classified(R"({"ev":"failure","t":5,"what":"uncaught ValueError on rank 1 (n1): x","kind":"uncaught"})"),
            FailureRecord::kUncaught);
  EXPECT_EQ(Classified(R"({"ev":"failure","t":5,"what":"refused to go on at 2 ranks: ...","kind":"refused"})"),
            FailureRecord::kRefused);
  EXPECT_EQ(Classified(R"({"ev":"failure","t":5,"what":"uncaught input in shard 3, skipped","kind":"other"})"),
            FailureRecord::kOther);
  EXPECT_EQ(Classified(R"({"ev":"failure","t":5,"what":"refused connection to the data server","kind":"other"})"),
            FailureRecord::kOther);
  // The text does not matter once there is a kind, nor does a kind this baton does not know.
  EXPECT_EQ(Classified(R"({"ev":"failure","t":5,"what":"ZeroDivisionError","kind":"uncaught"})"),
            FailureRecord::kUncaught);
  EXPECT_EQ(Classified(R"({"ev":"failure","t":5,"what":"uncaught x","kind":"later-kind"})"), FailureRecord::kOther);
}

TEST(StepVerdict, AFailureRecordWithoutKindIsReadByItsTextAsOlderBatonWroteIt) {
  EXPECT_EQ(Classified(R"({"ev":"failure","t":5,"what":"uncaught ZeroDivisionError on rank 1 (n2): division by zero"})"),
            FailureRecord::kUncaught);
  EXPECT_EQ(Classified(R"({"ev":"failure","t":5,"what":"refused to go on at 2 ranks: step 30 was saved by 3 ranks"})"),
            FailureRecord::kRefused);
  EXPECT_EQ(Classified(R"j({"ev":"failure","t":5,"what":"Timeout [runtime] ranks not answering heartbeats: 0 (n1)","exit":75})j"),
            FailureRecord::kOther);
  EXPECT_EQ(Classified(R"({"ev":"failure","t":5,"what":"uncaughtish"})"), FailureRecord::kOther);
  // Only a failure record has a failure kind: another record's "kind" is not read as one.
  events::Event e;
  ASSERT_TRUE(events::ParseEventLine(R"({"ev":"stop","t":5,"kind":"uncaught"})", &e).ok());
  EXPECT_EQ(e.failure_kind, "");
}

// The job's comment names the cause, not Slurm's cancellation notice that
// raced it onto the last line (a fresh-clone check, 2026-12-07: "last words:
// slurmstepd-n1: error: *** STEP 115.0 ON n1 CANCELLED AT ... ***" where the
// program had printed its restart cap).
TEST(StepVerdict, SlurmsCancelNoticeAndSrunsLinesAreNotLastWords) {
  EXPECT_TRUE(IsLastWords("baton-train: restart cap: 1 restart(s) in a row found no newer checkpoint"));
  EXPECT_TRUE(IsLastWords("slurmstepd: error: Detected 1 oom_kill event in StepId=7.0"));  // a cause: kept
  EXPECT_FALSE(IsLastWords("slurmstepd-n1: error: *** STEP 115.0 ON n1 CANCELLED AT 2026-12-07T01:06:34 ***"));
  EXPECT_FALSE(IsLastWords("slurmstepd: error: *** JOB 12 ON c3 CANCELLED AT 2026-12-07T01:06:34 ***"));
  EXPECT_TRUE(IsLastWords("slurmstepd: error: *** JOB 12 ON c3 CANCELLED AT 2026-12-07T01:06:34 DUE TO TIME LIMIT ***"));
  EXPECT_FALSE(IsLastWords("srun: error: n2: task 1: Exited with exit code 3"));
  EXPECT_FALSE(IsLastWords("   "));
  EXPECT_FALSE(IsLastWords(""));
}

}  // namespace
}  // namespace baton::launch
