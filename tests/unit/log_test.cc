#include "baton/log.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "baton/identity.h"

namespace baton::log {
namespace {

TEST(LogLevel, ParsesEveryNameInAnyCase) {
  Level l = Level::off;
  ASSERT_TRUE(ParseLevel("trace", &l).ok());
  EXPECT_EQ(l, Level::trace);
  ASSERT_TRUE(ParseLevel("DEBUG", &l).ok());
  EXPECT_EQ(l, Level::debug);
  ASSERT_TRUE(ParseLevel("Info", &l).ok());
  EXPECT_EQ(l, Level::info);
  ASSERT_TRUE(ParseLevel("warn", &l).ok());
  EXPECT_EQ(l, Level::warning);
  ASSERT_TRUE(ParseLevel("warning", &l).ok());
  EXPECT_EQ(l, Level::warning);
  ASSERT_TRUE(ParseLevel("error", &l).ok());
  EXPECT_EQ(l, Level::error);
  ASSERT_TRUE(ParseLevel("off", &l).ok());
  EXPECT_EQ(l, Level::off);
}

TEST(LogLevel, RejectsUnknownNamingTheValue) {
  Level l = Level::info;
  Status s = ParseLevel("loud", &l);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("'loud'"), std::string::npos) << s;
  EXPECT_EQ(l, Level::info) << "the level is untouched on error";
}

// The sink writes to standard error; each case runs in a child process
// (gtest's death-test machinery) so BATON_LOG_LEVEL is read afresh.
class LogOutput : public ::testing::Test {
 protected:
  // Re-executing the binary gives each child a logger not yet set up.
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(LogOutput, LineCarriesChannelLevelRankHostAndJob) {
  EXPECT_EXIT(
      {
        setenv("SLURM_PROCID", "3", 1);
        setenv("SLURM_JOB_ID", "17", 1);
        setenv("SLURM_STEP_ID", "2", 1);
        unsetenv("RANK");
        unsetenv("BATON_LOG_LEVEL");
        std::string host = CurrentIdentity().host;
        BATON_LOG(kCkpt, warning) << "falling back to step " << 40;
        std::exit(host.empty() ? 1 : 0);
      },
      ::testing::ExitedWithCode(0),
      "baton\\.ckpt WARNING rank=3 host=[^ ]+ job=17\\.2: falling back to step 40");
}

TEST_F(LogOutput, DefaultLevelIsInfo) {
  EXPECT_EXIT(
      {
        unsetenv("BATON_LOG_LEVEL");
        BATON_LOG(kBase, debug) << "hidden-debug-line";
        BATON_LOG(kBase, info) << "shown-info-line";
        std::exit(GetLevel() == Level::info ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "^[^\n]*shown-info-line\n$");
}

TEST_F(LogOutput, LevelFromEnvironment) {
  EXPECT_EXIT(
      {
        setenv("BATON_LOG_LEVEL", "error", 1);
        BATON_LOG(kRuntime, warning) << "hidden-warning";
        BATON_LOG(kRuntime, error) << "shown-error";
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "^[^\n]*baton\\.runtime ERROR[^\n]*shown-error\n$");
  EXPECT_EXIT(
      {
        setenv("BATON_LOG_LEVEL", "debug", 1);
        BATON_LOG(kSpank, debug) << "shown-debug";
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "baton\\.spank DEBUG[^\n]*shown-debug");
}

TEST_F(LogOutput, OffSilencesEverything) {
  EXPECT_EXIT(
      {
        setenv("BATON_LOG_LEVEL", "off", 1);
        BATON_LOG(kBase, error) << "should-not-appear";
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "^$");
}

TEST_F(LogOutput, BadLevelIsReportedNamingTheValueAndInfoKept) {
  EXPECT_EXIT(
      {
        setenv("BATON_LOG_LEVEL", "chatty", 1);
        Status s = Init();
        BATON_LOG(kBase, info) << "still-logging";
        std::exit(s.code() == Code::kInvalidArgument && GetLevel() == Level::info ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "baton\\.base WARNING[^\n]*BATON_LOG_LEVEL: log level 'chatty' is not one of[^\n]*using "
      "info\n[^\n]*still-logging");
}

// baton(7): one line per record. Ranks that share a stream (mpirun
// forwards every rank's stderr through one pipe; srun --output to one
// file) must not merge records on a line: each record is one write().
// Four processes stand in for four ranks, each writing 2000 records at
// once into one pipe; every line read back must be one whole record.
TEST(LogRecords, RanksWritingAtOnceToOneStreamKeepEveryLineWhole) {
  constexpr int kRanks = 4, kRecords = 2000;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::vector<pid_t> children;
  for (int r = 0; r < kRanks; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      dup2(fds[1], 2);
      unsetenv("BATON_LOG_LEVEL");
      for (int i = 0; i < kRecords; ++i) BATON_LOG(kBase, info) << "record " << r << " " << i << " end";
      _exit(0);
    }
    children.push_back(pid);
  }
  close(fds[1]);
  std::string all;
  char buf[65536];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0) continue;  // EINTR
    all.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  // (The rank field is whatever this process's identity was when first
  // asked; each record names its writer in its text.)
  const std::regex whole(R"(^\S+ \S+ baton\.base INFO rank=\S+ host=\S+ job=\S+: record ([0-9]) ([0-9]+) end$)");
  std::istringstream lines(all);
  int bad = 0;
  std::string first_bad;
  std::set<std::pair<int, int>> seen;
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_match(line, m, whole)) {
      seen.insert({std::stoi(m[1]), std::stoi(m[2])});
    } else if (bad++ == 0) {
      first_bad = line;
    }
  }
  EXPECT_EQ(bad, 0) << "lines that are not one whole record, the first: '" << first_bad << "'";
  EXPECT_EQ(seen.size(), static_cast<size_t>(kRanks * kRecords)) << "records lost or repeated";
}

}  // namespace
}  // namespace baton::log
