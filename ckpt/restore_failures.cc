#include "ckpt/restore_failures.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>

#include "ckpt/fs/durable_write.h"

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

Status CountRestoreFailures(fs::Env* env, const std::string& version_path, int* count) {
  *count = 0;
  std::string failures;
  Status s = env->ReadFile(version_path + "/" + kRestoreFailuresName, kMaxRestoreFailuresBytes, &failures);
  if (s.code() == Code::kNotFound) return Status::OK();
  BATON_RETURN_IF_ERROR(s);
  *count = CountLines(failures);
  return Status::OK();
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

}  // namespace baton::ckpt
