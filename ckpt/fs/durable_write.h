// The one way ckpt replaces a file durably (leveldb's WriteStringToFileSync):
// the bytes go to a temporary of this writer's own in the target's
// directory, are fsynced, the temporary is renamed over the target and the
// directory is fsynced. A reader sees the old file or the new one, never
// half of one; a crash before the rename leaves the old file. On any
// failure the temporary is removed and the Status names the target, the
// step that failed and errno's text.
//
// The temporary is ".<name>.tmp.<pid>.<random>": hidden, so no listing of
// ckpt takes it for a version (v<seq>-s<step>), a manifest
// (manifest.json*), a shard (shard-N.h5) or a run file; unique, so two
// writers of one name (ranks marking a restore failure) and a leftover of a
// crashed writer are never in each other's way. A leftover of a crash goes
// with its directory (a version's removal); RemoveDurableTemporaries
// removes those of a directory that stays (the checkpoint root's `run`).
//
// Everything goes through the Env, so the fault Env's failures (ENOSPC,
// short writes, a crash before the rename) reach it.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>

#include "baton/status.h"
#include "ckpt/fs/env.h"

namespace baton::ckpt::fs {

struct DurableWriteOptions {
  mode_t mode = 0644;
  // After the fsync, tell the kernel the file's pages are not needed
  // (posix_fadvise DONTNEED): for large files (shards, partner and level-3
  // copies), so that a node's own, partner and level-3 copies do not all
  // stay in its page cache. A hint; a failure of it changes nothing.
  bool drop_cache = false;
};

// ".<name>.tmp.<pid>.<random hex>".
std::string DurableTemporaryName(std::string_view name);
// Whether a directory entry is such a temporary (of any writer).
bool IsDurableTemporary(std::string_view entry);

// A file written durably in pieces (a copy, a received partner file):
// Create makes the temporary, Append writes to it, Commit makes it the
// target. Destroyed (or Abandon'ed) without a successful Commit, it removes
// its temporary. Not thread-safe.
class DurableFile {
 public:
  static Status Create(Env* env, const std::string& dir, const std::string& name, const DurableWriteOptions& options,
                       std::unique_ptr<DurableFile>* out);
  ~DurableFile();
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;

  Status Append(const void* data, size_t n);
  // WritableFile::StartWriteback of the temporary: a hint.
  void StartWriteback();
  // fsync, (drop the cache), close, rename over the target, fsync the
  // directory. Once only; a failure removes the temporary.
  Status Commit();
  // Removes the temporary (nothing when committed or already abandoned).
  void Abandon();

  const std::string& path() const { return path_; }            // the target
  const std::string& temporary() const { return tmp_path_; }

 private:
  DurableFile(Env* env, std::string dir, std::string path, std::string tmp_path, bool drop_cache)
      : env_(env), dir_(std::move(dir)), path_(std::move(path)), tmp_path_(std::move(tmp_path)),
        drop_cache_(drop_cache) {}
  // `s` annotated with the target and the step ("write", "fsync", ...);
  // the temporary removed.
  Status Fail(std::string_view step, const Status& s);

  Env* env_;
  std::string dir_, path_, tmp_path_;
  bool drop_cache_;
  std::unique_ptr<WritableFile> file_;
  bool done_ = false;  // committed or abandoned: the temporary is not ours to remove
};

// dir/name := bytes, durably (above).
Status WriteFileDurably(Env* env, const std::string& dir, const std::string& name, std::string_view bytes,
                        const DurableWriteOptions& options = DurableWriteOptions());

// Removes every durable temporary directly in dir whose target is `name`
// ("" for any): leftovers of writers that crashed. Only for a directory
// where no other live writer of that name can be at work (the writer lock's
// holder's `run`). Best effort: *removed counts what went; the first
// failure is returned after trying the rest.
Status RemoveDurableTemporaries(Env* env, const std::string& dir, std::string_view name, int* removed = nullptr);

}  // namespace baton::ckpt::fs
