#include "ckpt/catalog.h"

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cstdio>

#include "ckpt/manifest.h"
#include "ckpt/restore_failures.h"

namespace baton::ckpt {

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
    s = CountRestoreFailures(env, v.path, &v.restore_failures);
    if (!s.ok()) v.problem = kRestoreFailuresName + std::string(": ") + s.message() + " (counted as no failures)";
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
