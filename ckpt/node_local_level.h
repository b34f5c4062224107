// Level 2: this node's copies on node-local storage (ckpt/README.md,
// "Levels 2 and 3"). MPI-free: the file side of the level; the partner
// exchange is ckpt/partner_exchange.h, the Checkpointer's use of both
// ckpt/level2_save.cc and ckpt/level_choice.cc.
//
//   <local_dir>/                      made 0700 when missing, kept otherwise
//     <run id>/                       this checkpoint run's (0700), kept across requeues
//       v<seq>-s<step>/               the version, named as in the shared directory
//         shard-<rank>.h5, .json      the own copies of this node's ranks
//         partner/shard-<rank>.h5, .json   verified copies of the partner node's ranks
//         level3                      what level 3 did with the version (Level3Record), before the manifest
//         manifest.json               the version's top-level manifest, written last
//
// A version is complete on a node when its manifest.json is there (the same
// format and commit as the shared directory: ckpt/catalog.h), so the CLI's
// listing and retention work on it unchanged. Its files are those of an
// asynchronous save (one shard per rank), so the normal restore path reads
// them.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "baton/status.h"
#include "ckpt/catalog.h"
#include "ckpt/fs/env.h"
#include "ckpt/hdf5/shard_writer.h"

namespace baton::ckpt {

inline constexpr const char* kPartnerDirName = "partner";
inline constexpr const char* kLevel3RecordName = "level3";

// What level 3 did with a version, recorded beside its node-local copy
// before the node's manifest is committed, so that restore can tell a
// version level 3 never got from one removed from the shared directory on
// purpose (docs/recovery.md, "Which level a restore reads"). One line:
//   "committed"      level 3 committed the same version;
//   "absent <name>"  level 3 did not get it (not due, or it failed); <name>
//                    is level 3's newest complete version at the time ("-":
//                    none), the version the level-2 copy follows.
// A version without the file (or with one that does not parse) is
// kUnknown: treated as committed (taken only while level 3 holds it).
struct Level3Record {
  enum class Kind { kUnknown, kCommitted, kAbsent };
  Kind kind = Kind::kUnknown;
  std::string base;  // kAbsent: level 3's newest then, "-" for none
};
std::string EncodeLevel3Record(const Level3Record& r);
Level3Record ParseLevel3Record(const std::string& text);
// The rule restore applies (docs/recovery.md, "Which level a restore
// reads"): whether level 3 lost the node-local version `name` of record
// `r`, level 3 now holding the versions `in_level3` (complete or
// quarantined), so that its level-2 copy must not be restored; *why says
// how, for the log and `baton ckpt ls`.
bool Level3Lost(const std::string& name, const Level3Record& r, const std::set<std::string>& in_level3,
                const std::string& level3_dir, std::string* why);

// Copies `from` to `to` through the Env in pieces, durably
// (fs::DurableFile: a temporary, fsync, the cache dropped, rename,
// directory fsync); *bytes: the size copied. Aborted (nothing left
// behind) once *abandon is set or the steady clock is past `deadline`
// (seconds since its epoch: WaitOrAbandon's bound), checked before each
// piece.
Status CopyFileDurably(fs::Env* env, const std::string& from, const std::string& to, mode_t mode, uint64_t* bytes,
                       const std::atomic<bool>* abandon = nullptr,
                       double deadline = std::numeric_limits<double>::infinity());

// A node-local version's partner/ directory, when there is one, must be a
// directory inside the version: a symlink (to a copy elsewhere) or any
// other file is InvalidArgument naming it; none at all is OK. Used by the
// restore's listing (the partner copies are then not offered) and by
// `baton ckpt verify --level node-local` (a failure).
Status CheckPartnerDir(fs::Env* env, const std::string& version_dir);

class NodeLocalLevel {
 public:
  // Off until Open succeeds.
  bool on() const { return !root_.empty(); }
  // Makes <local_dir> and <local_dir>/<run_id> (dir_mode) when missing;
  // existing ones (a requeue, another rank of the node) are used as they
  // are, unless <run_id> is not this user's own directory: a symlink, owned
  // by another user, or writable by group or others beyond dir_mode (a
  // pre-made 0777 directory lets anyone swap the versions restored):
  // InvalidArgument naming the path, its mode and owner.
  Status Open(fs::Env* env, const std::string& local_dir, const std::string& run_id, mode_t dir_mode);
  const std::string& root() const { return root_; }
  std::string VersionDir(const std::string& name) const { return root_ + "/" + name; }
  std::string PartnerDir(const std::string& name) const { return VersionDir(name) + "/" + kPartnerDirName; }

  // What a rank's background writer does for a version (no MPI): its shard
  // into the local version directory; then, when `shared_due`, the same
  // bytes copied into shared_vdir. When the local write fails (ENOSPC, an
  // I/O error) the shard goes to shared_vdir instead, written from the
  // staged rows: *local_failure says why, and the save still succeeds.
  // A failed copy to shared_vdir after a good local write is
  // *shared_failure (level 2 may still commit the version). Returns a
  // failure only when neither level holds the shard (or Aborted).
  struct WriteOutcome {
    bool local_ok = false;
    bool shared_written = false;
    Status local_failure;
    Status shared_failure;
  };
  Status WriteShard(const std::string& name, const std::string& file, const std::string& shared_vdir, bool shared_due,
                    const std::vector<h5::ShardArray>& arrays, const h5::ShardWriteOptions& options,
                    const std::atomic<bool>* abandon, h5::ShardWriteResult* result, WriteOutcome* out) const;

  // The version's level-3 record, then its manifest, committed on this
  // node (each: temporary, fsync, rename, directory fsyncs).
  Status WriteManifest(const std::string& name, const std::string& text, const Level3Record& record,
                       mode_t file_mode) const;
  // Keeps the newest `keep` complete versions (and removes crashed ones
  // older than the newest complete one): catalog.h's PlanRetention. With
  // `none_in_progress` (no save of this directory is being written: the
  // Checkpointer's start, or right after a commit) incomplete versions
  // newer than the newest complete one go too: they are saves that failed
  // or crashed, and a full disk must not keep them.
  void ApplyRetention(int keep, bool none_in_progress) const;
  // Removes one version's node-local directory (a save whose level 2
  // failed), manifest first; a warning when it cannot.
  void RemoveVersionDir(const std::string& name) const;

  // What this node holds of a complete version, as one rank sees it.
  struct Held {
    std::string name;
    uint64_t seq = 0;
    int64_t step = 0;
    int world_size = 0;           // from its manifest; 0 when it does not parse
    bool own = false;             // shard-<rank>.h5 and .json
    std::vector<int> partner_of;  // ranks whose shard and index are in partner/
    Level3Record level3;          // its level3 file
    VersionInfo info;             // as listed here (its restore_failures: this node's crash marks)
  };
  Status List(int rank, std::vector<Held>* out) const;

 private:
  fs::Env* env_ = nullptr;
  std::string root_;
  mode_t dir_mode_ = 0700;
};

}  // namespace baton::ckpt
