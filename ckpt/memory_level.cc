#include "ckpt/memory_level.h"

#include <cstring>

#include "baton/log.h"
#include "ckpt/checkpointer_impl.h"

namespace baton::ckpt {

std::optional<int64_t> MemoryLevel::held_step() const {
  if (held_ == nullptr) return std::nullopt;
  return held_->step;
}

Status MemoryLevel::CheckMatches(const std::map<std::string, Registered>& arrays) const {
  if (held_ == nullptr) {
    return Status::NotFound(log::kCkpt, "no snapshot in memory (none was staged by SaveAsync since the last "
                                        "Save, Restore or failed save)");
  }
  const std::string of = "the snapshot of step " + std::to_string(held_->step);
  if (arrays.size() != held_->arrays.size()) {
    return Status::InvalidArgument(log::kCkpt, std::to_string(arrays.size()) + " arrays are registered, " + of +
                                                   " holds " + std::to_string(held_->arrays.size()));
  }
  auto it = arrays.begin();
  for (const StagedArray& a : held_->arrays) {
    const Registered& r = (it++)->second;
    if (r.meta.name != a.meta.name || r.meta.dtype != a.meta.dtype || r.meta.shape != a.meta.shape ||
        r.meta.replicated != a.meta.replicated) {
      return Status::InvalidArgument(log::kCkpt, "array " + r.meta.name + " " + ShapeText(r.meta.shape) +
                                                     " is not the array " + a.meta.name + " " +
                                                     ShapeText(a.meta.shape) + " of " + of);
    }
    if (!r.meta.replicated && (r.first_row != a.first_row || r.rows != a.rows)) {
      return Status::InvalidArgument(log::kCkpt, "array " + r.meta.name + ": this rank holds rows from " +
                                                     std::to_string(r.first_row) + " (" + std::to_string(r.rows) +
                                                     "), " + of + " rows from " + std::to_string(a.first_row) +
                                                     " (" + std::to_string(a.rows) + ")");
    }
  }
  return Status::OK();
}

void MemoryLevel::RestoreInto(const std::map<std::string, Registered>& arrays, std::string* blob,
                              std::string* rank_state) const {
  auto it = arrays.begin();
  for (const StagedArray& a : held_->arrays) {
    const Registered& r = (it++)->second;
    std::memcpy(r.data, a.data, a.rows * a.meta.row_bytes());
  }
  *blob = held_->blob;
  *rank_state = held_->rank_state;
}

}  // namespace baton::ckpt
