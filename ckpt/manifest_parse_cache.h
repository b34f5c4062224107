// The last manifest text a Checkpointer parsed, and its parse. A restore
// parses its version's top-level manifest on every rank, and rank 0 twice
// (LoadManifest's checks of the file, then the broadcast text); Python's
// front ends read a version's metadata (ReadMetadata) and then restore that
// version pinned: rank 0 parsed one text four times per restore, on the
// other ranks' critical path, ~10-20 ms each for an FSDP2 state of 2,000
// boxes (docs/benchmarks.md, 2026-12-06). The text is the key (compared whole):
// a version's manifest never changes once committed, but a reused name (a
// directory removed and written again) or an edit is another text, so a
// hit is always the same bytes' parse. MPI-free, not thread-safe (one per
// Checkpointer, whose calls are serial).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "baton/status.h"
#include "ckpt/manifest.h"

namespace baton::ckpt {

class ManifestParseCache {
 public:
  // ParseManifestJson(text, out, max_values), or a copy of the last
  // successful parse of the same text under a limit no looser than
  // max_values (one that held then holds now). A failed parse is not kept.
  Status Parse(std::string_view text, Manifest* out, uint64_t max_values = kAnyNumberOfValues);

 private:
  bool valid_ = false;
  std::string text_;
  uint64_t max_values_ = 0;
  Manifest parsed_;
};

}  // namespace baton::ckpt
