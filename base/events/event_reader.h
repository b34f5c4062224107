#pragma once
// Reads the event logs of a checkpoint directory (event_log.h, docs/events.md)
// into records, for `baton report`. MPI-free. A line that is not a complete
// record (the last line of a log still being written, or cut by a crash) is
// skipped and counted, never an error: the report runs during a job.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "baton/status.h"

namespace baton::events {

struct Event {
  std::string kind;  // start, step, save, stop, restore, failure, end, step_end (others kept, unused)
  double t = 0;      // Unix seconds
  int rank = -1;     // from the file's start record (else the file name)
  std::string launch;
  int64_t step = -1;
  double dur = 0;  // step: its compute time; save/restore: the time the call blocked
  std::optional<double> loss;
  int level = 0;  // restore: the level read; save: the newest level committed
  bool async = false;
  bool ok = true;
  std::string what;  // failure: as the rank saw it
  std::string failure_kind;  // failure: its "kind" (uncaught, refused, other); "" in logs of older baton
  // step_end only (written by the batch script, `baton step-end`): how a
  // step ended as the script saw it
  std::optional<int> exit;                                // srun's exit status
  std::string said;                                       // srun's error lines for that step
  std::vector<std::pair<std::string, std::string>> lost;  // the step's nodes that cannot run a step: host, why
  // start only
  int world = 0;
  int restart = 0;
  std::string job, host;
  std::vector<std::string> hosts;
};

struct ReadStats {
  int files = 0;
  int64_t records = 0;
  int64_t bad_lines = 0;  // not JSON, or not a record: skipped
};

// One line (without its newline). InvalidArgument naming what is wrong.
Status ParseEventLine(std::string_view line, Event* out);

// The records of one file's text: each record after a "start" belongs to its
// launch and rank; records before any start get `file_rank`.
void ParseEventText(std::string_view text, int file_rank, std::vector<Event>* out, ReadStats* stats);

// Every <dir>/events/*.jsonl (or DIR itself when it is the events folder).
// NotFound when there is no such folder.
Status ReadEventDir(const std::string& dir, std::vector<Event>* out, ReadStats* stats);

}  // namespace baton::events
