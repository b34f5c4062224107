// A level of the checkpoint hierarchy (SCR's levels): a place where this
// rank keeps a copy of a saved version.
//
//   1  memory      the staged copy of the newest SaveAsync (memory_level.h)
//   2  node-local  this node's disk and a partner node's copy (issue 17, to come)
//   3  shared      the checkpoint directory (the Checkpointer's own save path)
//
// The Checkpointer hands each level every version it stages (Accept), and
// asks it what it holds. Levels that write (2, 3) do so in the background
// from the staged copy and report completion at the next call, as the
// shared write of SaveAsync does. Threading: the Checkpointer's thread.
#pragma once

#include <cstdint>
#include <optional>

#include "ckpt/staging_pool.h"

namespace baton::ckpt {

class Level {
 public:
  virtual ~Level() = default;
  virtual int number() const = 0;
  virtual const char* name() const = 0;
  // A version was staged; `v` stays valid until the next Stage.
  virtual void Accept(const StagedVersion& v) = 0;
  // What this level held is stale (a Save, a Restore, or a Stage under way).
  virtual void Drop() = 0;
  // The step of the version this rank's copy holds; nullopt: none.
  virtual std::optional<int64_t> held_step() const = 0;
};

}  // namespace baton::ckpt
