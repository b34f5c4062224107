// Level 2's files on node-local storage (ckpt/node_local_level.h).
#include "ckpt/node_local_level.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "baton/log.h"
#include "ckpt/catalog.h"
#include "ckpt/fs/durable_write.h"
#include "ckpt/hdf5/rank_shard_writer.h"
#include "ckpt/manifest.h"
#include "ckpt/manifest_index.h"
#include "ckpt/retention.h"
#include "ckpt/version_removal.h"

namespace baton::ckpt {
namespace {

constexpr uint64_t kCopyPieceBytes = 16u << 20;

std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

bool Exists(fs::Env* env, const std::string& path) {
  fs::FileInfo info;
  return env->Stat(path, &info).ok() && info.type == fs::FileType::kRegular;
}

std::string Base(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string EncodeLevel3Record(const Level3Record& r) {
  if (r.kind == Level3Record::Kind::kCommitted) return "committed\n";
  if (r.kind == Level3Record::Kind::kAbsent) return "absent " + (r.base.empty() ? std::string("-") : r.base) + "\n";
  return "unknown\n";
}

Level3Record ParseLevel3Record(const std::string& text) {
  Level3Record r;
  uint64_t seq = 0;
  int64_t step = 0;
  if (text == "committed\n") {
    r.kind = Level3Record::Kind::kCommitted;
  } else if (text.rfind("absent ", 0) == 0 && text.size() > 8 && text.back() == '\n') {
    const std::string base = text.substr(7, text.size() - 8);
    if (base == "-" || ParseVersionName(base, &seq, &step)) {
      r.kind = Level3Record::Kind::kAbsent;
      r.base = base;
    }
  }
  return r;
}

bool Level3Lost(const std::string& name, const Level3Record& r, const std::set<std::string>& in_level3,
                const std::string& level3_dir, std::string* why) {
  if (r.kind == Level3Record::Kind::kAbsent) {
    if (r.base == "-" || in_level3.count(r.base) != 0) return false;
    *why = "it was saved after " + r.base + ", which is gone from " + level3_dir;
    return true;
  }
  if (in_level3.count(name) != 0) return false;
  *why = r.kind == Level3Record::Kind::kCommitted
             ? "level 3 committed it and " + level3_dir + " no longer holds it"
             : "its node-local record of level 3 is missing and " + level3_dir + " does not hold it";
  return true;
}

Status CopyFileDurably(fs::Env* env, const std::string& from, const std::string& to, mode_t mode, uint64_t* bytes,
                       const std::atomic<bool>* abandon, double deadline) {
  *bytes = 0;
  fs::FileInfo info;
  BATON_RETURN_IF_ERROR(env->Stat(from, &info));
  // A large file: its pages leave the cache after the fsync, so that the
  // node's own, partner and level-3 copies do not all stay in memory.
  fs::DurableWriteOptions o;
  o.mode = mode;
  o.drop_cache = true;
  std::unique_ptr<fs::DurableFile> f;
  Status s = fs::DurableFile::Create(env, Parent(to), Base(to), o, &f);
  if (!s.ok()) return s.Annotate("copying " + from);
  std::vector<char> buf(static_cast<size_t>(std::min<uint64_t>(kCopyPieceBytes, std::max<uint64_t>(info.size, 1))));
  for (uint64_t off = 0; off < info.size && s.ok(); off += kCopyPieceBytes) {
    // Checked between pieces, as the shard writer checks between chunks:
    // a stop signal's bounded wait (WaitOrAbandon) is not held up by the
    // copy of a large shard to a slow shared file system.
    if (abandon != nullptr && abandon->load(std::memory_order_relaxed)) {
      s = Status::Aborted(log::kCkpt, "the copy of " + from + " was abandoned");
      break;
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count() > deadline) {
      s = Status::Aborted(log::kCkpt, "the copy of " + from + " ran past its deadline (WaitOrAbandon's bound)");
      break;
    }
    const uint64_t n = std::min(kCopyPieceBytes, info.size - off);
    s = env->ReadAt(from, off, n, buf.data());
    if (s.ok()) s = f->Append(buf.data(), n);
  }
  if (s.ok()) s = f->Commit();
  if (!s.ok()) {
    f->Abandon();  // the temporary goes (nothing when Append or Commit removed it already)
    return s.code() == Code::kAborted ? s : s.Annotate("copying " + from);
  }
  *bytes = info.size;
  return Status::OK();
}

namespace {

std::string OctalMode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

}  // namespace

Status NodeLocalLevel::Open(fs::Env* env, const std::string& local_dir, const std::string& run_id, mode_t dir_mode) {
  env_ = env;
  dir_mode_ = dir_mode;
  std::string dir = local_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  BATON_RETURN_IF_ERROR(env->CreateDir(dir, dir_mode, /*exist_ok=*/true).Annotate("node-local directory"));
  const std::string root = dir + "/" + run_id;
  BATON_RETURN_IF_ERROR(env->CreateDir(root, dir_mode, /*exist_ok=*/true).Annotate("node-local directory"));
  fs::FileInfo info;
  BATON_RETURN_IF_ERROR(env->Stat(root, &info));
  if (info.type != fs::FileType::kDirectory) {
    return Status::InvalidArgument(log::kCkpt, "node-local checkpoint directory " + root + " is not a directory" +
                                                   (info.type == fs::FileType::kSymlink ? " (a symlink)" : ""));
  }
  const uid_t me = ::geteuid();
  const mode_t loose = info.mode & 022 & ~dir_mode;
  if (info.uid != me || loose != 0) {
    const std::string why = info.uid != me ? "not this user's (uid " + std::to_string(me) + ")"
                                           : std::string("writable by ") + ((loose & 002) ? "others" : "its group");
    return Status::InvalidArgument(log::kCkpt, "node-local checkpoint directory " + root + " has mode " +
                                                   OctalMode(info.mode) + " and owner uid " + std::to_string(info.uid) +
                                                   ": " + why +
                                                   ", so another user could replace the versions it restores; remove "
                                                   "it, or make it this user's with a mode within " +
                                                   OctalMode(dir_mode));
  }
  root_ = root;
  return Status::OK();
}

Status CheckPartnerDir(fs::Env* env, const std::string& version_dir) {
  const std::string path = version_dir + "/" + kPartnerDirName;
  fs::FileInfo info;
  Status s = env->Stat(path, &info);
  if (s.code() == Code::kNotFound) return Status::OK();
  BATON_RETURN_IF_ERROR(s);
  if (info.type == fs::FileType::kSymlink) {
    return Status::InvalidArgument(log::kCkpt, path + " is a symlink; partner copies must be files inside the version");
  }
  if (info.type != fs::FileType::kDirectory) {
    return Status::InvalidArgument(log::kCkpt, path + " is not a directory");
  }
  return Status::OK();
}

Status NodeLocalLevel::WriteShard(const std::string& name, const std::string& file, const std::string& shared_vdir,
                                  bool shared_due, const std::vector<h5::ShardArray>& arrays,
                                  const h5::ShardWriteOptions& options, const std::atomic<bool>* abandon,
                                  h5::ShardWriteResult* result, WriteOutcome* out) const {
  *out = WriteOutcome();
  const std::string local = VersionDir(name) + "/" + file;
  Status s = env_->CreateDir(VersionDir(name), dir_mode_, /*exist_ok=*/true);
  if (s.ok()) {
    // A file left by a crashed run under the same name (the seq is never
    // reused in one shared directory, but the local disk may be older).
    if (Exists(env_, local)) (void)env_->RemoveFile(local);
    h5::ShardWriteOptions kept = options;
    kept.drop_cache = false;  // read again by the copy to level 3 and the partner send
    s = h5::WriteRankShard(local, arrays, kept, abandon, result);
  }
  if (s.code() == Code::kAborted) return s;
  if (!s.ok()) {
    // Level 2 failed on this node (a full disk): level 3 instead, and the
    // version's local directory goes at the commit (a full disk must not
    // keep what failed).
    out->local_failure = s;
    if (Exists(env_, local)) (void)env_->RemoveFile(local);
    *result = h5::ShardWriteResult();
    // Made at the save only when level 3 was due (NameLevel2Version).
    BATON_RETURN_IF_ERROR(env_->CreateDir(shared_vdir, dir_mode_, /*exist_ok=*/true));
    BATON_RETURN_IF_ERROR(h5::WriteRankShard(shared_vdir + "/" + file, arrays, options, abandon, result));
    out->shared_written = true;
    return Status::OK();
  }
  out->local_ok = true;
  if (!shared_due) return Status::OK();
  uint64_t bytes = 0;
  s = CopyFileDurably(env_, local, shared_vdir + "/" + file, options.file_mode, &bytes, abandon);
  if (s.code() == Code::kAborted) return s;
  // A failed copy to level 3 leaves level 2 good: the commit decides.
  if (!s.ok()) {
    out->shared_failure = s;
    return Status::OK();
  }
  out->shared_written = true;
  return Status::OK();
}

Status NodeLocalLevel::WriteManifest(const std::string& name, const std::string& text, const Level3Record& record,
                                     mode_t file_mode) const {
  const std::string vdir = VersionDir(name);
  // The record is durable before the manifest makes the version complete:
  // a complete version always says what level 3 did with it.
  fs::DurableWriteOptions o;
  o.mode = file_mode;
  BATON_RETURN_IF_ERROR(fs::WriteFileDurably(env_, vdir, kLevel3RecordName, EncodeLevel3Record(record), o));
  BATON_RETURN_IF_ERROR(env_->SyncDir(vdir));  // the shards' and indexes' entries first
  BATON_RETURN_IF_ERROR(fs::WriteFileDurably(env_, vdir, kManifestName, text, o));
  return env_->SyncDir(root_);
}

void NodeLocalLevel::RemoveVersionDir(const std::string& name) const {
  fs::FileInfo info;
  if (!env_->Stat(VersionDir(name), &info).ok()) return;  // nothing was made here
  VersionInfo v;
  v.name = name;
  v.path = VersionDir(name);
  v.status = Exists(env_, v.path + "/" + kManifestName) ? VersionStatus::kComplete : VersionStatus::kIncomplete;
  Status s = RemoveVersion(env_, v);
  if (!s.ok()) {
    BATON_LOG(kCkpt, warning) << "level 2: could not remove the failed save " << v.path << ": " << s;
  }
}

void NodeLocalLevel::ApplyRetention(int keep, bool none_in_progress) const {
  std::vector<VersionInfo> versions;
  Status s = ListVersions(env_, root_, /*max_restore_failures=*/1 << 30, &versions);
  if (!s.ok()) {
    BATON_LOG(kCkpt, warning) << "level-2 retention skipped: " << s;
    return;
  }
  std::vector<VersionInfo> remove = PlanRetention(versions, keep);
  if (none_in_progress) {
    for (const VersionInfo& v : versions) {
      const bool planned = std::any_of(remove.begin(), remove.end(), [&](const VersionInfo& r) { return r.name == v.name; });
      if (v.status == VersionStatus::kIncomplete && v.problem.empty() && !planned) remove.push_back(v);
    }
  }
  for (const VersionInfo& v : remove) {
    s = RemoveVersion(env_, v);
    if (!s.ok()) {
      BATON_LOG(kCkpt, warning) << "level-2 retention could not remove " << v.path << ": " << s;
    }
  }
}

Status NodeLocalLevel::List(int rank, std::vector<Held>* out) const {
  out->clear();
  std::vector<VersionInfo> versions;
  BATON_RETURN_IF_ERROR(ListVersions(env_, root_, /*max_restore_failures=*/1 << 30, &versions));
  const std::string mine = "shard-" + std::to_string(rank) + ".h5";
  for (const VersionInfo& v : versions) {
    if (v.status != VersionStatus::kComplete) continue;
    Held h;
    h.name = v.name;
    h.seq = v.seq;
    h.step = v.step;
    h.info = v;
    std::string text;
    Manifest m;
    uint64_t max_values = 0;
    if (ReadManifestText(env_, v.path, v.path + "/" + kManifestName, &text, &max_values).ok() &&
        ParseManifestJson(text, &m, max_values).ok()) {
      h.world_size = m.world_size;
    }
    std::string record;
    if (env_->ReadFile(v.path + "/" + kLevel3RecordName, 4096, &record).ok()) h.level3 = ParseLevel3Record(record);
    h.own = Exists(env_, v.path + "/" + mine) && Exists(env_, v.path + "/" + ShardIndexName(mine));
    std::vector<std::string> names;
    if (Status partner = CheckPartnerDir(env_, v.path); !partner.ok()) {
      BATON_LOG(kCkpt, warning) << "level 2: the partner copies of " << v.path << " are not used: " << partner;
    } else if (env_->ListDir(v.path + "/" + kPartnerDirName, &names).ok()) {
      for (const std::string& n : names) {
        int k = -1;
        char tail[8] = {0};
        if (std::sscanf(n.c_str(), "shard-%d.h5%7s", &k, tail) != 1 || k < 0) continue;
        if (n != "shard-" + std::to_string(k) + ".h5") continue;
        if (Exists(env_, v.path + "/" + kPartnerDirName + "/" + ShardIndexName(n))) h.partner_of.push_back(k);
      }
      std::sort(h.partner_of.begin(), h.partner_of.end());
    }
    out->push_back(std::move(h));
  }
  return Status::OK();
}

}  // namespace baton::ckpt
