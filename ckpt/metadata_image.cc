#include "ckpt/metadata_image.h"

#include <algorithm>
#include <memory>

#include "ckpt/checksum.h"
#include "ckpt/metadata_checksum.h"

namespace baton::ckpt {

uint64_t MetadataImage::bytes() const {
  uint64_t n = 0;
  for (const auto& p : pieces) n += p.second.size();
  return n;
}

std::shared_ptr<const MetadataImage> MetadataImages::Find(const std::string& layout) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < recent_.size(); ++i) {
    if (recent_[i]->layout != layout) continue;
    const auto at = recent_.begin() + static_cast<ptrdiff_t>(i);
    std::rotate(recent_.begin(), at, at + 1);
    return recent_.front();
  }
  return nullptr;
}

void MetadataImages::Keep(std::shared_ptr<const MetadataImage> image) {
  if (image == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  recent_.erase(std::remove_if(recent_.begin(), recent_.end(),
                               [&](const auto& kept) { return kept->layout == image->layout; }),
                recent_.end());
  recent_.insert(recent_.begin(), std::move(image));
  // The newest first, while the count and the bytes allow (one over the
  // bytes alone is not kept either).
  uint64_t bytes = 0;
  size_t keep = 0;
  while (keep < recent_.size() && keep < kMaxImages && bytes + recent_[keep]->bytes() <= kMaxBytes) {
    bytes += recent_[keep]->bytes();
    ++keep;
  }
  recent_.resize(keep);
}

std::shared_ptr<const MetadataImage> MetadataImages::Capture(fs::Env* env, const std::string& path,
                                                             uint64_t file_bytes,
                                                             std::vector<std::pair<uint64_t, uint64_t>> extents,
                                                             std::string layout, std::vector<uint64_t> offsets) {
  auto made = std::make_shared<MetadataImage>();
  if (!CaptureMetadataImage(env, path, file_bytes, std::move(extents), std::move(layout), std::move(offsets), made.get())
           .ok()) {
    return nullptr;
  }
  Keep(made);
  return made;
}

void MetadataImages::Forget(const std::string& layout) {
  std::lock_guard<std::mutex> lock(mu_);
  recent_.erase(std::remove_if(recent_.begin(), recent_.end(), [&](const auto& kept) { return kept->layout == layout; }),
                recent_.end());
}

Status CaptureMetadataImage(fs::Env* env, const std::string& path, uint64_t file_bytes,
                            std::vector<std::pair<uint64_t, uint64_t>> extents, std::string layout,
                            std::vector<uint64_t> offsets, MetadataImage* out) {
  MetadataImage image;
  image.layout = std::move(layout);
  image.file_bytes = file_bytes;
  image.offsets = std::move(offsets);
  Xxh3Stream sum;
  BATON_RETURN_IF_ERROR(ReadOutsideExtents(env, path, file_bytes, std::move(extents),
                                           [&](uint64_t offset, const char* data, size_t n) {
                                             sum.Update(data, n);
                                             auto& pieces = image.pieces;
                                             // Gaps read apart but touching: one piece.
                                             if (!pieces.empty() &&
                                                 pieces.back().first + pieces.back().second.size() == offset) {
                                               pieces.back().second.append(data, n);
                                             } else {
                                               pieces.emplace_back(offset, std::string(data, n));
                                             }
                                           }));
  image.meta_xxh3 = sum.Digest();
  *out = std::move(image);
  return Status::OK();
}

Status WriteMetadataImage(fs::Env* env, const std::string& path, const MetadataImage& image) {
  BATON_RETURN_IF_ERROR(env->Reserve(path, image.file_bytes));
  // The size HDF5's close gave the file, before any member writes a row:
  // the group's first rank reports it without waiting for the others.
  BATON_RETURN_IF_ERROR(env->Resize(path, image.file_bytes));
  if (image.pieces.empty()) return Status::OK();
  std::unique_ptr<fs::WritableFile> f;
  BATON_RETURN_IF_ERROR(env->OpenForWriteAt(path, image.pieces.front().first, &f));
  for (const auto& [offset, bytes] : image.pieces) {
    BATON_RETURN_IF_ERROR(f->Seek(offset));
    BATON_RETURN_IF_ERROR(f->Append(bytes.data(), bytes.size()));
  }
  return f->Close();
}

}  // namespace baton::ckpt
