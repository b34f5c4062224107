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

bool IsRemovingName(const std::string& name) {
  const size_t n = sizeof kRemovingPrefix - 1;
  uint64_t seq;
  int64_t step;
  return name.compare(0, n, kRemovingPrefix) == 0 && ParseVersionName(std::string_view(name).substr(n), &seq, &step);
}

std::vector<VersionInfo> LeftoverRemovals(fs::Env* env, const std::string& dir) {
  std::vector<VersionInfo> out;
  std::vector<std::string> names;
  if (!env->ListDir(dir, &names).ok()) return out;
  for (const std::string& n : names) {
    if (!IsRemovingName(n)) continue;
    VersionInfo v;
    v.name = n;
    v.path = dir + "/" + n;
    // Their manifests first as well: a rename a crash may still undo is no reason to trust one.
    v.status = VersionStatus::kComplete;
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<VersionInfo> SetAsideForRemoval(fs::Env* env, const std::string& dir,
                                            const std::vector<VersionInfo>& versions) {
  std::vector<VersionInfo> out = LeftoverRemovals(env, dir);
  for (const VersionInfo& v : versions) {
    VersionInfo aside = v;
    aside.name = kRemovingPrefix + v.name;
    aside.path = dir + "/" + aside.name;
    // A rename moves a symlink swapped in for the directory, never its target; RemoveTreeAt then refuses it.
    // A version that cannot be renamed is removed where it is, off the caller's thread all the same.
    out.push_back(env->Rename(v.path, aside.path).ok() ? std::move(aside) : v);
  }
  return out;
}

}  // namespace baton::ckpt
