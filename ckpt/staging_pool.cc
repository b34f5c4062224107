#include "ckpt/staging_pool.h"

#include <algorithm>
#include <cstring>

#include "ckpt/layout.h"

namespace baton::ckpt {

void CopyAndHash(char* dst, const char* src, uint64_t n, uint64_t slice_begin, uint64_t slice_end,
                 Xxh3Stream* slice, Xxh3Stream* whole) {
  // 128 KiB: well inside a core's L2, so the hash reads the block from the
  // cache the copy just filled instead of from memory a second time.
  constexpr uint64_t kBlock = 128 << 10;
  for (uint64_t at = 0; at < n; at += kBlock) {
    const uint64_t len = std::min(kBlock, n - at);
    std::memcpy(dst + at, src + at, len);
    if (whole != nullptr) whole->Update(dst + at, len);
    if (slice != nullptr) {
      const uint64_t b = std::max(at, slice_begin), e = std::min(at + len, slice_end);
      if (b < e) slice->Update(dst + b, e - b);
    }
  }
}

char* StagingPool::Buffer(size_t slot, uint64_t bytes) {
  if (slot >= buffers_.size()) {
    buffers_.resize(slot + 1);
    sizes_.resize(slot + 1, 0);
  }
  if (sizes_[slot] < bytes || !buffers_[slot]) {
    // new char[] leaves it uninitialised: no zero-filling pass (the copy
    // touches every byte).
    buffers_[slot].reset(new char[std::max<uint64_t>(bytes, 1)]);
    sizes_[slot] = bytes;
  }
  return buffers_[slot].get();
}

uint64_t StagingPool::capacity() const {
  uint64_t total = 0;
  for (uint64_t s : sizes_) total += s;
  return total;
}

void StagingPool::Stage(int64_t step, const std::map<std::string, Registered>& arrays, int world, int rank,
                        bool hash_replicas, const std::string& blob, const std::string& rank_state) {
  version_ = StagedVersion();
  version_.step = step;
  size_t slot = 0;
  for (const auto& [name, r] : arrays) {
    StagedArray a;
    a.meta = r.meta;
    const uint64_t rb = r.meta.row_bytes();
    if (r.meta.replicated) {
      a.first_row = 0;
      a.rows = r.meta.rows();
      ReplicatedRows(r.meta.rows(), world, rank, &a.write_first, &a.write_rows);
    } else {
      a.first_row = a.write_first = r.first_row;
      a.rows = a.write_rows = r.rows;
    }
    const uint64_t bytes = a.rows * rb;
    char* dst = Buffer(slot++, bytes);
    Xxh3Stream slice, whole;
    const bool hash_whole = r.meta.replicated && hash_replicas;
    const uint64_t begin = (a.write_first - a.first_row) * rb;
    CopyAndHash(dst, static_cast<const char*>(r.data), bytes, begin, begin + a.write_rows * rb, &slice,
                hash_whole ? &whole : nullptr);
    a.write_xxh3 = slice.Digest();
    if (hash_whole) a.whole_xxh3 = whole.Digest();
    a.data = dst;
    version_.bytes += bytes;
    version_.arrays.push_back(std::move(a));
  }
  version_.blob = blob;
  version_.rank_state = rank_state;
}

}  // namespace baton::ckpt
