// The batch side of a job's event log, <dir>/events/<job>-batch.jsonl: what
// `baton run` and `baton step-end` record about the step's launches and
// ends, which no rank can write (docs/events.md).
#pragma once

#include <string>

#include "baton/status.h"

namespace baton::cli {

// Appends `line` (one record, newline included) to dir/events/<job>-batch.jsonl,
// making dir and dir/events (mode 0700, as the Checkpointer does) if needed. One write(2) with O_APPEND: the record lands
// whole after the others.
Status AppendBatchRecord(const std::string& dir, const std::string& job, const std::string& line);

// Seconds since the epoch, the records' `t`.
double NowSeconds();

}  // namespace baton::cli
