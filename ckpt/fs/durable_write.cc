#include "ckpt/fs/durable_write.h"

#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <random>
#include <vector>

namespace baton::ckpt::fs {

namespace {

constexpr std::string_view kTmpTag = ".tmp.";

// 64 random bits per name: with the pid, no two writers (other processes,
// other threads, other ranks on a shared file system: a pid repeats across
// nodes) meet, and neither does a leftover of a crashed one.
uint64_t RandomBits() {
  thread_local std::mt19937_64 gen = [] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), static_cast<unsigned>(::getpid())};
    return std::mt19937_64(seq);
  }();
  return gen();
}

}  // namespace

std::string DurableTemporaryName(std::string_view name) {
  char tail[64];
  std::snprintf(tail, sizeof tail, "%ld.%016" PRIx64, static_cast<long>(::getpid()), RandomBits());
  return "." + std::string(name) + std::string(kTmpTag) + tail;
}

bool IsDurableTemporary(std::string_view entry) {
  return entry.size() > 1 && entry[0] == '.' && entry.find(kTmpTag, 1) != std::string_view::npos;
}

Status DurableFile::Create(Env* env, const std::string& dir, const std::string& name,
                           const DurableWriteOptions& options, std::unique_ptr<DurableFile>* out) {
  const std::string path = dir + "/" + name;
  std::unique_ptr<DurableFile> f(
      new DurableFile(env, dir, path, dir + "/" + DurableTemporaryName(name), options.drop_cache));
  Status s = env->NewWritableFile(f->tmp_path_, options.mode, &f->file_);
  if (!s.ok()) {
    f->done_ = true;  // nothing was created (O_EXCL): nothing to remove
    return s.Annotate("writing " + path + ": creating its temporary failed");
  }
  *out = std::move(f);
  return Status::OK();
}

DurableFile::~DurableFile() { Abandon(); }

void DurableFile::Abandon() {
  if (done_) return;
  done_ = true;
  file_.reset();
  env_->RemoveFile(tmp_path_).IgnoreError();  // best effort; the failure reported is the first one
}

Status DurableFile::Fail(std::string_view step, const Status& s) {
  Abandon();
  return s.Annotate("writing " + path_ + ": " + std::string(step) + " failed");
}

Status DurableFile::Append(const void* data, size_t n) {
  if (done_ || !file_) return Status::Internal("ckpt", "writing " + path_ + ": append after the end");
  Status s = file_->Append(data, n);
  return s.ok() ? s : Fail("write", s);
}

void DurableFile::StartWriteback() {
  if (!done_ && file_) file_->StartWriteback();
}

Status DurableFile::Commit() {
  if (done_ || !file_) return Status::Internal("ckpt", "writing " + path_ + ": committed twice");
  Status s = file_->Sync();
  if (!s.ok()) return Fail("fsync", s);
  if (drop_cache_) file_->DropCache();
  s = file_->Close();
  if (!s.ok()) return Fail("close", s);
  file_.reset();
  s = env_->Rename(tmp_path_, path_);
  if (!s.ok()) return Fail("rename", s);
  done_ = true;  // the temporary is the target now
  s = env_->SyncDir(dir_);
  // The rename happened: the target holds the new bytes (removing it would
  // lose the old ones too), only its entry may not be durable yet.
  if (!s.ok()) return s.Annotate("writing " + path_ + ": fsync of the directory failed");
  return Status::OK();
}

Status WriteFileDurably(Env* env, const std::string& dir, const std::string& name, std::string_view bytes,
                        const DurableWriteOptions& options) {
  std::unique_ptr<DurableFile> f;
  BATON_RETURN_IF_ERROR(DurableFile::Create(env, dir, name, options, &f));
  BATON_RETURN_IF_ERROR(f->Append(bytes.data(), bytes.size()));
  return f->Commit();
}

Status RemoveDurableTemporaries(Env* env, const std::string& dir, std::string_view name, int* removed) {
  if (removed != nullptr) *removed = 0;
  std::vector<std::string> names;
  BATON_RETURN_IF_ERROR(env->ListDir(dir, &names));
  const std::string prefix = name.empty() ? std::string() : "." + std::string(name) + std::string(kTmpTag);
  Status first;
  for (const std::string& n : names) {
    if (!IsDurableTemporary(n) || n.compare(0, prefix.size(), prefix) != 0) continue;
    FileInfo info;
    // Only regular files: a directory of that name is nobody's temporary.
    if (!env->Stat(dir + "/" + n, &info).ok() || info.type != FileType::kRegular) continue;
    Status s = env->RemoveFile(dir + "/" + n);
    if (s.ok() && removed != nullptr) ++*removed;
    if (!s.ok() && s.code() != Code::kNotFound && first.ok()) first = s;
  }
  return first;
}

}  // namespace baton::ckpt::fs
