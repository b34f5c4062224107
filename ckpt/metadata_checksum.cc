#include "ckpt/metadata_checksum.h"

#include <algorithm>

#include "ckpt/checksum.h"

namespace baton::ckpt {
namespace {

constexpr uint64_t kPiece = 1 << 20;

}  // namespace

Status HashOutsideExtents(fs::Env* env, const std::string& path, uint64_t file_bytes,
                          std::vector<std::pair<uint64_t, uint64_t>> extents, uint64_t* xxh3) {
  std::sort(extents.begin(), extents.end());
  Xxh3Stream sum;
  std::vector<char> buf;
  uint64_t at = 0;
  auto hash_to = [&](uint64_t end) -> Status {
    end = std::min(end, file_bytes);
    while (at < end) {
      const uint64_t n = std::min(kPiece, end - at);
      buf.resize(n);
      BATON_RETURN_IF_ERROR(env->ReadAt(path, at, n, buf.data()));
      sum.Update(buf.data(), n);
      at += n;
    }
    return Status::OK();
  };
  for (const auto& [begin, end] : extents) {
    BATON_RETURN_IF_ERROR(hash_to(begin));
    at = std::max(at, std::min(end, file_bytes));
  }
  BATON_RETURN_IF_ERROR(hash_to(file_bytes));
  *xxh3 = sum.Digest();
  return Status::OK();
}

}  // namespace baton::ckpt
