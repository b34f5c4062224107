// What holds when two processes append to one event log (docs/events.md,
// "Two writers on one file"): on the file systems of this machine and of
// the local cluster (ext4, tmpfs) O_APPEND puts each write(2) of whole
// records after the others; NFS does not promise it, and the race it can
// make (two writers at one stale end) is written by hand to show what the
// reader does with it.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/events/event_log.h"
#include "base/events/event_reader.h"
#include "base/events/goodput.h"

namespace baton::events {
namespace {

constexpr int kWriters = 4, kRecords = 2000;

std::string MakeDir(const std::string& parent) {
  std::string templ = parent + "/baton-append-XXXXXX";
  const char* d = mkdtemp(templ.data());
  return d != nullptr ? std::string(d) : std::string();
}

void RemoveTree(const std::string& dir) {
  const std::string cmd = "rm -rf '" + dir + "'";
  (void)std::system(cmd.c_str());
}

// kWriters processes (fork), each its own log process-wide, all opened on
// the same rank's file, each writing kRecords step records, one write(2)
// per record (steps at once), then checks every line.
void AppendFromProcesses(const std::string& parent) {
  const std::string dir = MakeDir(parent);
  ASSERT_FALSE(dir.empty()) << "mkdtemp in " << parent;
  std::vector<pid_t> kids;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ResetForTest();
      WriteStepsAtOnce(true);
      if (!Open(dir, 0).ok()) _exit(3);
      for (int i = 0; i < kRecords; ++i) {
        // A record of a length that differs by writer, so that an overlap shows.
        Emit(Record("step").Int("step", i).Int("writer", w).Str("pad", std::string(static_cast<size_t>(10 + 30 * w), 'x')));
      }
      _exit(FlushNow(2000) ? 0 : 4);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer status " << status;
  }
  std::vector<Event> events;
  ReadStats st;
  ASSERT_TRUE(ReadEventDir(dir, &events, &st).ok());
  EXPECT_EQ(st.files, 1);
  EXPECT_EQ(st.bad_lines, 0) << "records interleaved in " << parent;
  EXPECT_EQ(st.records, kWriters * kRecords);
  // Every writer's every step, once.
  std::ifstream in(dir + "/events/" + FileName(JobName(), 0));
  std::set<std::string> seen;
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    const size_t s = line.find("\"step\":"), w = line.find("\"writer\":");
    ASSERT_NE(s, std::string::npos) << line;
    ASSERT_NE(w, std::string::npos) << line;
    seen.insert(line.substr(s, line.find(',', s) - s) + line.substr(w, line.find(',', w) - w));
  }
  EXPECT_EQ(lines, kWriters * kRecords);
  EXPECT_EQ(seen.size(), static_cast<size_t>(kWriters * kRecords));
  RemoveTree(dir);
}

TEST(EventAppend, FourProcessesOnExt4LoseNothingAndNeverInterleave) {
  // The build directory: this machine's ext4, the local cluster's shared /tmp's.
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  AppendFromProcesses(cwd);
}

TEST(EventAppend, FourProcessesOnTmpfsLoseNothingAndNeverInterleave) {
  struct stat st {};
  if (stat("/dev/shm", &st) != 0 || !S_ISDIR(st.st_mode)) GTEST_SKIP() << "no /dev/shm on this machine";
  AppendFromProcesses("/dev/shm");
}

// NFS's append is the client's: it writes at the end it last saw. Two
// clients that saw the same end write over each other. Written here by
// hand (pwrite at a stale offset): the reader keeps the whole records,
// skips and counts the broken line, and the report goes on.
TEST(EventAppend, TheRaceNfsCanMakeIsSkippedAndCounted) {
  const std::string a = R"({"ev":"start","t":100,"launch":"L","rank":0,"world":1})" "\n"
                        R"({"ev":"step","t":101,"step":1,"dur":1})" "\n";
  // Host A appends step 2 (a long record); host B, which saw the same end,
  // writes its shorter step record over its start.
  const std::string from_a = R"({"ev":"step","t":102,"step":2,"dur":1,"loss":0.123456789})" "\n";
  const std::string from_b = R"({"ev":"step","t":102.5,"step":2,"dur":1})" "\n";
  std::string file = a + from_a;
  file.replace(a.size(), from_b.size(), from_b);
  file += R"({"ev":"step","t":103,"step":3,"dur":1})" "\n";
  std::vector<Event> events;
  ReadStats st;
  ParseEventText(file, 0, &events, &st);
  EXPECT_EQ(st.bad_lines, 1);  // the rest of A's record, on a line of its own
  EXPECT_EQ(st.records, 4);    // start, step 1, B's step 2, step 3
  const Report r = Analyze(events);
  EXPECT_EQ(r.steps, 3);
  EXPECT_EQ(r.last_step, 3);
}

}  // namespace
}  // namespace baton::events
