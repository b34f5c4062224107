// Level 1: the newest snapshot in host memory, for Rollback.
//
// It is the staging copy of the newest SaveAsync itself (staging_pool.h),
// kept after the background write: no second copy. RestoreInto copies it
// back into the registered arrays and the blobs: no I/O. The ranks'
// agreement (same step everywhere) is the Checkpointer's (async_save.cc).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "baton/status.h"
#include "ckpt/level.h"
#include "ckpt/registered.h"

namespace baton::ckpt {

class MemoryLevel : public Level {
 public:
  int number() const override { return 1; }
  const char* name() const override { return "memory"; }
  void Accept(const StagedVersion& v) override { held_ = &v; }
  void Drop() override { held_ = nullptr; }
  std::optional<int64_t> held_step() const override;

  // InvalidArgument naming the first difference when the registrations are
  // not those of the snapshot (an array added, removed, reshaped, or rows
  // moved); NotFound when nothing is held. Local.
  Status CheckMatches(const std::map<std::string, Registered>& arrays) const;
  // Copies the snapshot into the registered arrays and the blobs. Call
  // after CheckMatches (and the ranks' agreement on it).
  void RestoreInto(const std::map<std::string, Registered>& arrays, std::string* blob,
                   std::string* rank_state) const;

 private:
  const StagedVersion* held_ = nullptr;  // the pool's version; null: none
};

}  // namespace baton::ckpt
