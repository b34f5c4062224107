#include "ckpt/manifest_parse_cache.h"

#include <utility>

namespace baton::ckpt {

Status ManifestParseCache::Parse(std::string_view text, Manifest* out, uint64_t max_values) {
  if (valid_ && max_values_ <= max_values && text == text_) {
    *out = parsed_;
    return Status::OK();
  }
  Manifest m;
  BATON_RETURN_IF_ERROR(ParseManifestJson(text, &m, max_values));
  // Kept before it is handed out: the caller may change its copy (a restore
  // loads the shard indexes into it).
  parsed_ = m;
  text_.assign(text.data(), text.size());
  max_values_ = max_values;
  valid_ = true;
  *out = std::move(m);
  return Status::OK();
}

}  // namespace baton::ckpt
