#pragma once
// The event log of this process: JSON lines (docs/events.md) that
// `baton report` reads to measure a job's goodput. One file per rank per
// job, next to the checkpoints: <dir>/events/<job>-r<rank>.jsonl, appended
// to by every launch of the job (a Slurm requeue, another srun in the same
// allocation), each launch beginning with a "start" record.
//
// Cheap: a record is formatted into a buffer; the buffer is written with one
// write(2) of whole records (O_APPEND, so records of two processes on one
// file never interleave) at a save, a stop, a failure, the end, and when it
// holds 64 KiB or is 5 s old. A process told to (WriteStepsAtOnce: the
// runtime tells local rank 0, one process per node) writes each step record
// at once, so that a job killed with SIGKILL still has its last step in the
// log of every node that survived. Bounded: past `max_bytes` in a file
// (BATON_EVENTS_MAX_BYTES, default 64 MiB) step records are dropped and
// counted (the "end" record says how many); other records, a few per save,
// are kept up to twice that. Before Open (a Runtime made before its
// Checkpointer), records wait in the buffer, at most 1 MiB.
//
// Process-wide: the runtime, the checkpointer and the program all write to
// the one log; every function may be called from any thread. MPI-free.
// BATON_EVENTS=0 turns the log off.
#include <cstdint>
#include <optional>
#include <string>

#include "baton/status.h"

namespace baton::events {

// One record: {"ev":"<kind>","t":<Unix seconds>, fields in call order}.
class Record {
 public:
  explicit Record(const char* kind);
  Record(const char* kind, double unix_seconds);
  Record& Int(const char* key, int64_t v);
  // NaN and infinities are not JSON: written as null.
  Record& Num(const char* key, double v);
  Record& Str(const char* key, const std::string& v);
  Record& Bool(const char* key, bool v);
  // `json` must be a JSON value already (an array built with JsonString).
  Record& Raw(const char* key, const std::string& json);
  // The finished line, with its newline.
  std::string Line() const { return body_ + "}\n"; }
  bool is_step() const { return step_; }

 private:
  std::string body_;
  bool step_ = false;
};

// `s` as a JSON string, quoted and escaped (bytes that are not UTF-8 replaced).
std::string JsonString(const std::string& s);

enum class Flush { kLater, kNow };

// Appends a record; kNow writes the buffer at once (saves, stops, failures).
void Emit(const Record& record, Flush flush = Flush::kLater);

// Whether this process writes each step record at once (one write(2) of
// about 60 bytes per step) instead of buffering it. Off by default.
void WriteStepsAtOnce(bool on);

// Opens <ckpt_dir>/events/<job>-r<rank>.jsonl (making events/ with `dir_mode`)
// and writes what was buffered. Again with the same file: nothing. With
// another: the buffer goes to the old file, then the new one is used.
Status Open(const std::string& ckpt_dir, int rank, unsigned dir_mode = 0700, unsigned file_mode = 0600);

// Writes the buffer. Waits at most `wait_ms` for another thread inside the
// log (a watchdog exiting while the training thread appends): false when it
// gave up or the write failed.
bool FlushNow(int wait_ms = 200);

// Whether the log is on (BATON_EVENTS is not 0).
bool Enabled();

// The job's name in file names and records: SLURM_JOB_ID, else "local".
std::string JobName();

// Which launch of the job this process belongs to, the same string on every
// rank of the launch and different for the next launch: Slurm's job, step
// and restart count, else the MPI launcher's namespace (PMIX_NAMESPACE,
// OMPI_MCA_ess_base_jobid), else this process.
std::string LaunchKey();

// The file name of a rank's log: "<job>-r<rank>.jsonl".
std::string FileName(const std::string& job, int rank);

// Wall time, Unix seconds.
double UnixNow();

// Records dropped so far (over the size bound).
uint64_t DroppedRecords();

// For tests: forget the open file and the buffer (records are lost).
void ResetForTest();

}  // namespace baton::events
