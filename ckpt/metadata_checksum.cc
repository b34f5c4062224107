#include "ckpt/metadata_checksum.h"

#include <algorithm>

#include "ckpt/checksum.h"

namespace baton::ckpt {
namespace {

// The most read at once, and the most of the data a read may span between
// two metadata gaps. Each ReadAt opens the file: a shard of 5,000 small
// datasets has 5,000 gaps between their data, and one read per gap cost
// 5,000 opens (a 5,000-array save's "meta_hash" 36-50 ms, a restore's
// "open" 16 ms, 2026-12-06). Gaps closer than kMaxSkipped are read
// together, the data between them read and not hashed: at most a window's
// worth of data extra per window, and none around a large dataset.
constexpr uint64_t kPiece = 1 << 20;
constexpr uint64_t kMaxSkipped = 64 << 10;

using Range = std::pair<uint64_t, uint64_t>;  // [begin, end)

// The bytes of [0, file_bytes) outside the extents, ascending, disjoint.
std::vector<Range> Gaps(uint64_t file_bytes, std::vector<Range> extents) {
  std::sort(extents.begin(), extents.end());
  std::vector<Range> gaps;
  uint64_t at = 0;
  for (const auto& [begin, end] : extents) {
    const uint64_t b = std::min(begin, file_bytes);
    if (at < b) gaps.emplace_back(at, b);
    at = std::max(at, std::min(end, file_bytes));
  }
  if (at < file_bytes) gaps.emplace_back(at, file_bytes);
  return gaps;
}

}  // namespace

Status ReadOutsideExtents(fs::Env* env, const std::string& path, uint64_t file_bytes,
                          std::vector<std::pair<uint64_t, uint64_t>> extents,
                          const std::function<void(uint64_t, const char*, size_t)>& take) {
  const std::vector<Range> gaps = Gaps(file_bytes, std::move(extents));
  std::vector<char> buf;
  for (size_t i = 0; i < gaps.size();) {
    // Gaps i..j in one read: each within kPiece of gap i's start, each
    // after at most kMaxSkipped bytes of data.
    size_t j = i;
    while (j + 1 < gaps.size() && gaps[j + 1].second - gaps[i].first <= kPiece &&
           gaps[j + 1].first - gaps[j].second <= kMaxSkipped) {
      ++j;
    }
    if (j == i) {  // alone (or large): in pieces of at most kPiece
      for (uint64_t at = gaps[i].first; at < gaps[i].second;) {
        const uint64_t n = std::min(kPiece, gaps[i].second - at);
        buf.resize(n);
        BATON_RETURN_IF_ERROR(env->ReadAt(path, at, n, buf.data()));
        take(at, buf.data(), n);
        at += n;
      }
    } else {
      const uint64_t base = gaps[i].first;
      buf.resize(gaps[j].second - base);
      BATON_RETURN_IF_ERROR(env->ReadAt(path, base, buf.size(), buf.data()));
      for (size_t k = i; k <= j; ++k) {
        take(gaps[k].first, buf.data() + (gaps[k].first - base), gaps[k].second - gaps[k].first);
      }
    }
    i = j + 1;
  }
  return Status::OK();
}

Status HashOutsideExtents(fs::Env* env, const std::string& path, uint64_t file_bytes,
                          std::vector<std::pair<uint64_t, uint64_t>> extents, uint64_t* xxh3) {
  Xxh3Stream sum;
  BATON_RETURN_IF_ERROR(ReadOutsideExtents(env, path, file_bytes, std::move(extents),
                                           [&](uint64_t, const char* data, size_t n) { sum.Update(data, n); }));
  *xxh3 = sum.Digest();
  return Status::OK();
}

}  // namespace baton::ckpt
