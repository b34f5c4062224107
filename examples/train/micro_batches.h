// Which micro-batches a rank computes: rank r of `world` takes the
// contiguous block [r*M/world, (r+1)*M/world) of the M micro-batches of a
// step (floors; the world size need not divide M, blocks then differ by
// one). The block decides only who computes a micro-batch, never its
// numbers: its samples, its dropout stream and its place in the gradient
// sum follow from its index alone.
#pragma once

#include <cstdint>

namespace train {

struct Share {
  uint32_t first = 0;  // the first micro-batch of the block
  uint32_t count = 0;  // how many
};

inline Share ShareOf(uint32_t micro_batches, int world, int rank) {
  const uint64_t m = micro_batches, w = static_cast<uint64_t>(world), r = static_cast<uint64_t>(rank);
  const uint64_t first = r * m / w, end = (r + 1) * m / w;
  return {static_cast<uint32_t>(first), static_cast<uint32_t>(end - first)};
}

}  // namespace train
