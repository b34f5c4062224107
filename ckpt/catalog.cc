#include "ckpt/catalog.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <ctime>

#include "ckpt/fs/durable_write.h"
#include "ckpt/manifest.h"

namespace baton::ckpt {

namespace {

// A restore-failures file larger than this is not one baton wrote.
constexpr uint64_t kMaxRestoreFailuresBytes = 1 << 20;
// Reasons are cut here, so that the file stays small whatever failed.
constexpr size_t kMaxReasonBytes = 500;

std::string UtcNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int CountLines(const std::string& text) {
  int n = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) ++n;
    start = end + 1;
  }
  return n;
}

}  // namespace

std::string_view VersionStatusName(VersionStatus s) {
  switch (s) {
    case VersionStatus::kComplete: return "complete";
    case VersionStatus::kIncomplete: return "incomplete";
    case VersionStatus::kQuarantined: return "quarantined";
  }
  return "?";
}

std::string VersionName(uint64_t seq, int64_t step) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "v%08" PRIu64 "-s%" PRId64, seq, step);
  return buf;
}

bool ParseVersionName(std::string_view name, uint64_t* seq, int64_t* step) {
  if (name.size() < 2 || name[0] != 'v') return false;
  const size_t dash = name.find("-s");
  if (dash == std::string_view::npos) return false;
  uint64_t q = 0;
  int64_t s = 0;
  const char* seq_end = name.data() + dash;
  auto r1 = std::from_chars(name.data() + 1, seq_end, q);
  if (r1.ec != std::errc() || r1.ptr != seq_end) return false;
  const char* step_begin = seq_end + 2;
  const char* step_end = name.data() + name.size();
  if (step_begin == step_end || *step_begin == '-' || *step_begin == '+') return false;
  auto r2 = std::from_chars(step_begin, step_end, s);
  if (r2.ec != std::errc() || r2.ptr != step_end) return false;
  // One name per (seq, step): no extra leading zeros, no other spelling.
  if (VersionName(q, s) != name) return false;
  *seq = q;
  *step = s;
  return true;
}

Status ListVersions(fs::Env* env, const std::string& dir, int max_restore_failures, std::vector<VersionInfo>* out) {
  out->clear();
  std::vector<std::string> names;
  BATON_RETURN_IF_ERROR(env->ListDir(dir, &names));
  for (const std::string& name : names) {
    VersionInfo v;
    if (!ParseVersionName(name, &v.seq, &v.step)) continue;
    v.name = name;
    v.path = dir + "/" + name;
    fs::FileInfo info;
    Status s = env->Stat(v.path, &info);
    if (s.code() == Code::kNotFound) continue;  // removed since the listing (another rank's gc)
    if (!s.ok()) {
      v.problem = s.message();
      out->push_back(std::move(v));
      continue;
    }
    if (info.type != fs::FileType::kDirectory) continue;
    s = env->Stat(v.path + "/" + kManifestName, &info);
    if (s.ok()) {
      v.status = info.type == fs::FileType::kRegular ? VersionStatus::kComplete : VersionStatus::kIncomplete;
    } else if (s.code() == Code::kNotFound) {
      v.status = VersionStatus::kIncomplete;
    } else {
      v.problem = s.message();
      out->push_back(std::move(v));
      continue;
    }
    std::string failures;
    s = env->ReadFile(v.path + "/" + kRestoreFailuresName, kMaxRestoreFailuresBytes, &failures);
    if (s.ok()) {
      v.restore_failures = CountLines(failures);
    } else if (s.code() != Code::kNotFound) {
      v.problem = kRestoreFailuresName + std::string(": ") + s.message() + " (counted as no failures)";
    }
    if (v.status == VersionStatus::kComplete && max_restore_failures > 0 && v.restore_failures >= max_restore_failures) {
      v.status = VersionStatus::kQuarantined;
    }
    out->push_back(std::move(v));
  }
  std::sort(out->begin(), out->end(), [](const VersionInfo& a, const VersionInfo& b) {
    return a.seq != b.seq ? a.seq < b.seq : a.name < b.name;
  });
  return Status::OK();
}

uint64_t NextSeq(const std::vector<VersionInfo>& versions) {
  uint64_t next = 1;
  for (const VersionInfo& v : versions) next = std::max(next, v.seq + 1);
  return next;
}

namespace {

// Replaces the version's restore-failures file by `text` (removes it when
// empty) durably (fs::WriteFileDurably), so a reader sees the old or the
// new file, never half of one.
Status RewriteFailures(fs::Env* env, const VersionInfo& version, const std::string& text) {
  const std::string path = version.path + "/" + kRestoreFailuresName;
  if (text.empty()) {
    Status s = env->RemoveFile(path);
    if (!s.ok() && s.code() != Code::kNotFound) return s;
    return env->SyncDir(version.path);
  }
  // Its temporary is this writer's own (ranks may mark at once), so that
  // neither another writer nor a crash's leftover is in the way.
  return fs::WriteFileDurably(env, version.path, kRestoreFailuresName, text);
}

// The file's lines; a restore-failures that is not a regular file (a FIFO
// planted there) or larger than any baton writes counts as empty: the
// rewrite replaces it.
Status ReadFailures(fs::Env* env, const VersionInfo& version, std::string* text) {
  text->clear();
  Status s = env->ReadFile(version.path + "/" + kRestoreFailuresName, kMaxRestoreFailuresBytes, text);
  if (s.code() == Code::kInvalidArgument) {
    text->clear();
    return Status::OK();
  }
  if (!s.ok() && s.code() != Code::kNotFound) return s;
  if (!text->empty() && text->back() != '\n') *text += '\n';
  return Status::OK();
}

std::string FailureLine(const std::string& reason) {
  std::string line = UtcNow() + " " + reason.substr(0, kMaxReasonBytes);
  // One failure per line, whatever the reason holds.
  std::replace(line.begin(), line.end(), '\n', ' ');
  return line + "\n";
}

std::string AttemptMarker(const std::string& token) { return " unfinished restore attempt " + token + " "; }

}  // namespace

Status RecordRestoreFailure(fs::Env* env, const VersionInfo& version, const std::string& reason) {
  std::string text;
  BATON_RETURN_IF_ERROR(ReadFailures(env, version, &text));
  return RewriteFailures(env, version, text + FailureLine(reason));
}

Status BeginRestoreAttempt(fs::Env* env, const VersionInfo& version, std::string* token) {
  std::string text;
  BATON_RETURN_IF_ERROR(ReadFailures(env, version, &text));
  const std::string t = std::to_string(::getpid()) + "-" +
                        std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  BATON_RETURN_IF_ERROR(RewriteFailures(
      env, version,
      text + FailureLine(AttemptMarker(t).substr(1) +
                         "(the restoring process ended while reading this version: a crash, the OOM killer or a kill)")));
  *token = t;
  return Status::OK();
}

Status EndRestoreAttempt(fs::Env* env, const VersionInfo& version, const std::string& token,
                         const std::string* failure) {
  std::string text, kept;
  BATON_RETURN_IF_ERROR(ReadFailures(env, version, &text));
  const std::string marker = AttemptMarker(token);
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    if (line.find(marker) == std::string::npos && !line.empty()) kept += line + "\n";
    start = end + 1;
  }
  if (failure != nullptr) kept += FailureLine(*failure);
  return RewriteFailures(env, version, kept);
}

Status RemoveVersion(fs::Env* env, const VersionInfo& version) {
  const size_t slash = version.path.rfind('/');
  if (slash == std::string::npos || version.path.compare(slash + 1, std::string::npos, version.name) != 0) {
    return Status::Internal("ckpt", "version " + version.name + " at " + version.path);
  }
  // Through descriptors (Env::RemoveTreeAt): the version directory swapped
  // for a symlink after it was listed made a removal by path delete a
  // manifest.json outside the checkpoint directory.
  return env->RemoveTreeAt(version.path.substr(0, slash), version.name,
                           version.status != VersionStatus::kIncomplete ? kManifestName : "");
}

std::vector<VersionInfo> PlanRetention(const std::vector<VersionInfo>& versions, int keep) {
  // Never the newest complete version: keep < 1 counts as 1.
  keep = std::max(keep, 1);
  std::vector<const VersionInfo*> sorted;
  for (const VersionInfo& v : versions) {
    if (v.problem.empty() || v.problem.rfind(kRestoreFailuresName, 0) == 0) sorted.push_back(&v);
  }
  std::sort(sorted.begin(), sorted.end(), [](const VersionInfo* a, const VersionInfo* b) { return a->seq < b->seq; });
  bool any_complete = false;
  uint64_t newest_complete = 0;
  int complete_left = 0;
  for (const VersionInfo* v : sorted) {
    if (v->status == VersionStatus::kComplete) {
      any_complete = true;
      newest_complete = v->seq;
      ++complete_left;
    }
  }
  std::vector<VersionInfo> remove;
  for (const VersionInfo* v : sorted) {
    switch (v->status) {
      case VersionStatus::kComplete:
        // Ascending seq: the first (count - keep) complete versions go.
        if (complete_left-- > keep) remove.push_back(*v);
        break;
      case VersionStatus::kQuarantined:
      case VersionStatus::kIncomplete:
        if (any_complete && v->seq < newest_complete) remove.push_back(*v);
        break;
    }
  }
  return remove;
}

Status ResolveInside(fs::Env* env, const std::string& dir, const std::string& name, std::string* path) {
  if (!IsPlainFileName(name)) {
    return Status::InvalidArgument("ckpt", "\"" + name + "\" in " + dir + " is not a plain file name");
  }
  const std::string p = dir + "/" + name;
  fs::FileInfo info;
  BATON_RETURN_IF_ERROR(env->Stat(p, &info));
  if (info.type == fs::FileType::kSymlink) {
    return Status::InvalidArgument("ckpt", p + " is a symlink; files of a version must be regular files inside it");
  }
  if (info.type != fs::FileType::kRegular) return Status::InvalidArgument("ckpt", p + " is not a regular file");
  *path = p;
  return Status::OK();
}

}  // namespace baton::ckpt
