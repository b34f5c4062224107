#include "ckpt/run.h"


#include <algorithm>
#include <charconv>
#include <limits>
#include <random>

#include "baton/log.h"
#include "ckpt/checksum.h"
#include "ckpt/fs/durable_write.h"

namespace baton::ckpt {
namespace {

// A run file larger than this is not one baton wrote.
constexpr uint64_t kMaxRunFileBytes = 4096;

}  // namespace

bool ValidRunId(const std::string& id) {
  // Not "." nor "..": a run id names a directory under each node's local
  // directory (<local_dir>/<run id>/), and `baton ckpt gc --level
  // node-local` removes versions there, so a run file saying ".." would
  // aim it at the local directory's parent.
  if (id.empty() || id.size() > 64 || id == "." || id == "..") return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

std::string NewRunId() {
  std::random_device rd;
  const auto draw64 = [&rd] { return static_cast<uint64_t>(rd()) << 32 | rd(); };
  return HexU64(draw64()) + HexU64(draw64());
}

Status ReadRun(fs::Env* env, const std::string& dir, RunInfo* out) {
  const std::string path = dir + "/" + kRunFileName;
  std::string text;
  Status s = env->ReadFile(path, kMaxRunFileBytes, &text);
  if (s.code() == Code::kInvalidArgument) return Status::Corruption(log::kCkpt, s.message());
  BATON_RETURN_IF_ERROR(s);
  RunInfo run;
  bool have_id = false, have_seq = false;
  size_t start = 0;
  int line_no = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    auto bad = [&](const std::string& what) {
      return Status::Corruption(log::kCkpt, path + " line " + std::to_string(line_no) + ": " + what);
    };
    if (line.rfind("run_id ", 0) == 0 && !have_id) {
      run.run_id = line.substr(7);
      if (!ValidRunId(run.run_id)) return bad("not a run id (1-64 of [A-Za-z0-9._-], not . nor ..)");
      have_id = true;
    } else if (line.rfind("last_seq ", 0) == 0 && !have_seq) {
      const char* b = line.data() + 9;
      const char* e = line.data() + line.size();
      auto r = std::from_chars(b, e, run.last_seq);
      if (r.ec != std::errc() || r.ptr != e || b == e) return bad("not a sequence number");
      have_seq = true;
    } else {
      return bad("expected \"run_id ID\" then \"last_seq N\"");
    }
  }
  if (!have_id || !have_seq) return Status::Corruption(log::kCkpt, path + ": lacks run_id or last_seq");
  *out = std::move(run);
  return Status::OK();
}

Status WriteRun(fs::Env* env, const std::string& dir, const RunInfo& run, mode_t mode) {
  if (!ValidRunId(run.run_id)) {
    return Status::InvalidArgument(log::kCkpt, "run id \"" + run.run_id + "\": 1-64 of [A-Za-z0-9._-], not . nor ..");
  }
  const std::string text = "run_id " + run.run_id + "\nlast_seq " + std::to_string(run.last_seq) + "\n";
  fs::DurableWriteOptions o;
  o.mode = mode;
  return fs::WriteFileDurably(env, dir, kRunFileName, text, o);
}

Status OpenRun(fs::Env* env, const std::string& dir, const std::string& wanted, mode_t mode, RunInfo* out) {
  if (!wanted.empty() && !ValidRunId(wanted)) {
    return Status::InvalidArgument(log::kCkpt, "run id \"" + wanted + "\": must be 1-64 of [A-Za-z0-9._-], not . nor ..");
  }
  // The caller holds the writer lock: no other writer of `run` is at work,
  // so a temporary of it is a crashed writer's leftover.
  fs::RemoveDurableTemporaries(env, dir, kRunFileName).IgnoreError();  // a leftover in the way of nothing
  RunInfo run;
  Status s = ReadRun(env, dir, &run);
  if (s.ok()) {
    if (!wanted.empty() && wanted != run.run_id) {
      return Status::InvalidArgument(log::kCkpt, dir + " belongs to run " + run.run_id + ", not to run " + wanted +
                                                     " (CheckpointOptions::run_id): another run's checkpoints; use "
                                                     "another directory, or that run id to continue it");
    }
    *out = std::move(run);
    return Status::OK();
  }
  if (s.code() != Code::kNotFound) return s;
  // A new directory, or one written before run files: its versions so far
  // count as this run's.
  std::vector<VersionInfo> versions;
  BATON_RETURN_IF_ERROR(ListVersions(env, dir, 0, &versions));
  run.run_id = wanted.empty() ? NewRunId() : wanted;
  run.last_seq = NextSeq(versions) - 1;
  BATON_RETURN_IF_ERROR(WriteRun(env, dir, run, mode));
  *out = std::move(run);
  return Status::OK();
}

Status ReserveSeq(fs::Env* env, const std::string& dir, mode_t mode, const std::vector<VersionInfo>& versions,
                  RunInfo* run, uint64_t* seq, uint64_t count) {
  // A last_seq or a version's seq at the largest value (an edited run
  // file, a planted directory) has no successor: refused naming it, never
  // wrapped to a number a version already had.
  uint64_t highest = run->last_seq;
  for (const VersionInfo& v : versions) highest = std::max(highest, v.seq);
  if (highest > std::numeric_limits<uint64_t>::max() - std::max<uint64_t>(count, 1)) {
    return Status::Corruption(log::kCkpt, dir + ": sequence number " + std::to_string(highest) + " (" +
                                              (highest == run->last_seq ? "last_seq in " + std::string(kRunFileName)
                                                                        : std::string("a version directory")) +
                                              ") is the largest there is: no new version can follow it");
  }
  RunInfo next = *run;
  const uint64_t first = std::max(run->last_seq + 1, NextSeq(versions));
  next.last_seq = first + std::max<uint64_t>(count, 1) - 1;
  BATON_RETURN_IF_ERROR(WriteRun(env, dir, next, mode));
  *run = next;
  *seq = first;
  return Status::OK();
}

}  // namespace baton::ckpt
