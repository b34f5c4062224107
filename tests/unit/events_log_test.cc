// The event log's writer (base/events/event_log.*): buffered until a flush,
// whole records per write, bounded, and what it writes reads back.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/events/event_log.h"
#include "base/events/event_reader.h"
#include "tests/unit/ckpt_temp_dir.h"

namespace baton::events {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class EventLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ResetForTest();
    ::unsetenv("BATON_EVENTS_MAX_BYTES");
    path_ = dir_.path() + "/events/" + FileName(JobName(), 2);
  }
  void TearDown() override { ResetForTest(); }
  ckpt::TempDir dir_;
  std::string path_;
};

TEST(EventRecord, FormatsEachKindOfValue) {
  const std::string line = Record("step", 12.5)
                               .Int("step", 3)
                               .Num("dur", 0.25)
                               .Num("loss", std::nan(""))
                               .Str("what", "a \"quoted\"\nline")
                               .Bool("ok", false)
                               .Line();
  EXPECT_EQ(line, "{\"ev\":\"step\",\"t\":12.500000,\"step\":3,\"dur\":0.25,\"loss\":null,"
                  "\"what\":\"a \\\"quoted\\\"\\nline\",\"ok\":false}\n");
  Event e;
  ASSERT_TRUE(ParseEventLine(line.substr(0, line.size() - 1), &e).ok());
  EXPECT_EQ(e.what, "a \"quoted\"\nline");
  EXPECT_FALSE(e.loss.has_value());
}

TEST_F(EventLogTest, BuffersUntilOpenAndUntilAFlush) {
  Emit(Record("start", 1).Str("launch", "L").Int("rank", 2));
  ASSERT_TRUE(Open(dir_.path(), 2).ok());
  // What came before Open is written at Open.
  const std::string start = "{\"ev\":\"start\",\"t\":1.000000,\"launch\":\"L\",\"rank\":2}\n";
  EXPECT_EQ(ReadAll(path_), start);
  Emit(Record("step", 2).Int("step", 1).Num("dur", 0.5));
  EXPECT_EQ(ReadAll(path_), start) << "a step record is buffered, not written at once";
  Emit(Record("save", 3).Int("step", 1).Num("dur", 0.1), Flush::kNow);
  std::vector<Event> evs;
  ReadStats st;
  ASSERT_TRUE(ReadEventDir(dir_.path(), &evs, &st).ok());
  ASSERT_EQ(evs.size(), 3u);
  EXPECT_EQ(st.files, 1);
  EXPECT_EQ(evs[1].kind, "step");
  EXPECT_EQ(evs[1].rank, 2);
  EXPECT_EQ(evs[1].launch, "L");
  EXPECT_EQ(evs[2].kind, "save");
  // Opening the same file again changes nothing; a second launch appends.
  ASSERT_TRUE(Open(dir_.path(), 2).ok());
  ResetForTest();
  ASSERT_TRUE(Open(dir_.path(), 2).ok());
  Emit(Record("end", 4), Flush::kNow);
  evs.clear();
  ASSERT_TRUE(ReadEventDir(dir_.path() + "/events", &evs, &st).ok());
  ASSERT_EQ(evs.size(), 4u);
  EXPECT_EQ(evs[3].kind, "end");
}

TEST_F(EventLogTest, StepRecordsAtOnceWhenAsked) {
  ASSERT_TRUE(Open(dir_.path(), 2).ok());
  WriteStepsAtOnce(true);
  Emit(Record("step", 2).Int("step", 7).Num("dur", 0.5));
  EXPECT_EQ(ReadAll(path_), "{\"ev\":\"step\",\"t\":2.000000,\"step\":7,\"dur\":0.5}\n")
      << "the step record must be in the file before any flush (a SIGKILL loses the buffer)";
  WriteStepsAtOnce(false);
  Emit(Record("step", 3).Int("step", 8).Num("dur", 0.5));
  EXPECT_EQ(ReadAll(path_).find("\"step\":8"), std::string::npos) << "buffered again once turned off";
}

TEST_F(EventLogTest, StepRecordsPastTheBoundAreDroppedOthersKept) {
  ::setenv("BATON_EVENTS_MAX_BYTES", "4096", 1);
  ASSERT_TRUE(Open(dir_.path(), 2).ok());
  for (int i = 0; i < 1000; ++i) Emit(Record("step", 1).Int("step", i).Num("dur", 0.5));
  Emit(Record("failure", 2).Str("what", "x"), Flush::kNow);
  const std::string text = ReadAll(path_);
  EXPECT_LE(text.size(), 4096u + 100);
  EXPECT_GT(DroppedRecords(), 900u);
  EXPECT_NE(text.find("\"failure\""), std::string::npos);
  // Whole records only.
  EXPECT_EQ(text.back(), '\n');
  std::vector<Event> evs;
  ReadStats st;
  ASSERT_TRUE(ReadEventDir(dir_.path(), &evs, &st).ok());
  EXPECT_EQ(st.bad_lines, 0);
}

TEST_F(EventLogTest, AMissingDirectoryIsNamed) {
  std::vector<Event> evs;
  ReadStats st;
  const Status s = ReadEventDir(dir_.path() + "/nothing", &evs, &st);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find("nothing/events"), std::string::npos) << s;
  const Status o = Open(dir_.path() + "/not/there", 0);
  EXPECT_EQ(o.code(), Code::kIOError);
  EXPECT_NE(o.message().find("not/there/events"), std::string::npos) << o;
}

}  // namespace
}  // namespace baton::events
