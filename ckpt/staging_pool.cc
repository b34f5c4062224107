#include "ckpt/staging_pool.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "ckpt/layout.h"

namespace baton::ckpt {

namespace {

// Copies a block that is in the cache (just hashed) to memory that is not:
// streaming (non-temporal) stores, as glibc's memcpy uses for large copies,
// so the destination's lines are not read first and do not evict the
// source. dst must be 16-byte aligned for the stream stores; else memcpy.
void CopyOut(char* dst, const char* src, uint64_t n) {
#if defined(__SSE2__)
  if (reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
    uint64_t i = 0;
    for (; i + 64 <= n; i += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
      const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
    }
    std::memcpy(dst + i, src + i, n - i);
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

}  // namespace

void CopyAndHash(char* dst, const char* src, uint64_t n, uint64_t slice_begin, uint64_t slice_end,
                 ChunkHasher* slice, Xxh3Stream* whole) {
  // Block by block: the hash reads a block of the source (which brings it
  // into the cache), the copy then reads it from there and streams it out.
  // Memory traffic: one read and one write per byte, as memcpy's; a copy
  // first and a hash of the destination would read it back, or (with
  // ordinary stores) read the destination's lines before writing them.
  // 64 KiB blocks stay well inside a core's L2. The caller's thread owns
  // the source for the call, so the hashed bytes are the copied ones.
  constexpr uint64_t kBlock = 64 << 10;
  for (uint64_t at = 0; at < n; at += kBlock) {
    const uint64_t len = std::min(kBlock, n - at);
    if (whole != nullptr) whole->Update(src + at, len);
    if (slice != nullptr) {
      const uint64_t b = std::max(at, slice_begin), e = std::min(at + len, slice_end);
      if (b < e) slice->Update(src + b, e - b);
    }
    CopyOut(dst + at, src + at, len);
  }
#if defined(__SSE2__)
  _mm_sfence();  // the stream stores are visible before the writer thread starts
#endif
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
                        bool hash_replicas, const std::string& blob, const std::string& rank_state,
                        bool in_place) {
  version_ = StagedVersion();
  version_.step = step;
  version_.in_place = in_place;
  size_t slot = 0;
  version_.arrays.reserve(arrays.size());
  for (const auto& [name, r] : arrays) {
    StagedArray a;
    a.meta = r.meta;
    const uint64_t rb = r.meta.row_bytes();
    if (r.meta.replicated) {
      a.first_row = 0;
      a.rows = r.meta.rows();
      ReplicatedPart(name, r.meta.rows(), rb, world, rank, &a.write_first, &a.write_rows);
    } else {
      a.first_row = a.write_first = r.first_row;
      a.rows = a.write_rows = r.rows;
    }
    const uint64_t bytes = a.rows * rb;
    ChunkHasher slice(a.write_rows, rb);
    Xxh3Stream whole;
    const bool hash_whole = r.meta.replicated && hash_replicas;
    const uint64_t begin = (a.write_first - a.first_row) * rb;
    const char* src = static_cast<const char*>(r.data);
    if (in_place) {
      if (hash_whole) whole.Update(src, bytes);
      slice.Update(src + begin, a.write_rows * rb);
      a.data = src;
    } else {
      char* dst = Buffer(slot++, bytes);
      CopyAndHash(dst, src, bytes, begin, begin + a.write_rows * rb, &slice, hash_whole ? &whole : nullptr);
      a.data = dst;
      version_.bytes += bytes;
    }
    a.write_xxh3 = slice.Finish();
    if (hash_whole) a.whole_xxh3 = whole.Digest();
    version_.arrays.push_back(std::move(a));
  }
  version_.blob = blob;
  version_.rank_state = rank_state;
}

}  // namespace baton::ckpt
