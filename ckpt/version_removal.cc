#include "ckpt/version_removal.h"

#include "ckpt/manifest.h"

namespace baton::ckpt {

Status RemoveVersion(fs::Env* env, const VersionInfo& version) {
  const size_t slash = version.path.rfind('/');
  if (slash == std::string::npos || version.path.compare(slash + 1, std::string::npos, version.name) != 0) {
    return Status::Internal("ckpt", "version " + version.name + " at " + version.path);
  }
  // Through descriptors (Env::RemoveTreeAt): the version directory swapped
  // for a symlink after it was listed made a removal by path delete a
  // manifest.json outside the checkpoint directory.
  return env->RemoveTreeAt(version.path.substr(0, slash), version.name,
                           version.status != VersionStatus::kIncomplete ? kManifestName : "");
}

}  // namespace baton::ckpt
