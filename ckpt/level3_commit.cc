// Level 3 of a save written with level 2 on (ckpt/README.md, "Levels 2 and
// 3"): the shared directory's copy of the version, committed on the
// caller's thread at the save's completion (level2_save.cc decides when:
// every shared_every-th save, or in place of a level 2 that failed).
//
//   1. each rank's shard in the shared version directory: its writer
//      copied it there already when level 3 was due (or wrote it there when
//      its local write failed); else it is copied now from the node-local
//      copy; a copy the writer could not make is this rank's failure;
//   2. each rank writes its shard's index there, agreed;
//   3. rank 0 commits the manifest (commit.cc), with level 2's time when
//      level 2 has the same version; agreed; retention (`keep`).
// A failure is agreed and returned: the caller reports it per level, and
// removes the shared version directory when no level holds the version.
#include <mpi.h>

#include <string>
#include <vector>

#include "ckpt/agreement.h"
#include "ckpt/checkpointer_impl.h"
#include "ckpt/manifest_index.h"
#include "mpi_runtime/mpi_check.h"

namespace baton::ckpt {

Status CheckpointerImpl::CommitLevel3(const Manifest* level2) {
  const PendingSave& p = *pending_;
  std::vector<uint64_t> record = PendingShardRecord();
  if (!p.shared_due) {
    // Level 3 in place of a failed level 2: its directory was not made at
    // the save (NameLevel2Version); a writer that fell back may have made it.
    Status made = rank_ == 0 ? env_->CreateDir(p.vdir, options_.dir_mode, /*exist_ok=*/true) : Status::OK();
    BATON_RETURN_IF_ERROR(Agree(comm_, made));
  }
  const std::string file = ShardFileName(rank_);

  Status local = p.outcome.shared_failure;
  if (local.ok() && !p.outcome.shared_written) {
    uint64_t bytes = 0;
    local = CopyFileDurably(env_, local_.VersionDir(p.name) + "/" + file, p.vdir + "/" + file, options_.file_mode,
                            &bytes, nullptr, commit_deadline_);
  }
  if (local.ok()) local = IndexPendingShard(p.vdir, &record);
  // Copied and indexed everywhere: agreed within the records' gather (rank
  // 0 commits only then) and named by the agreement after the commit.
  Manifest m;
  local = GatherAndBuild(record, &m, local);
  if (level2 != nullptr && rank_ == 0) m.time = level2->time;
  if (local.ok() && rank_ == 0) local = CommitManifest(p.vdir, m);
  BATON_RETURN_IF_ERROR(Agree(comm_, local));
  if (rank_ == 0) {
    level3_newest_ = p.name;
    ApplyRetention();
  }
  return Status::OK();
}

}  // namespace baton::ckpt
