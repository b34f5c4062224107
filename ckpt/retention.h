// Which versions of a checkpoint directory retention removes (the save's
// `keep`, `baton ckpt gc --keep`); the removal itself is RemoveVersion
// (version_removal.h). MPI-free.
#pragma once

#include <vector>

#include "ckpt/catalog.h"

namespace baton::ckpt {

// What retention removes: all but the newest `keep` complete versions;
// quarantined versions older than the newest complete one; incomplete
// versions older than the newest complete one (crashed saves). Never an
// incomplete version newer than every complete one (a save in progress),
// nor a version with a problem (what it is is not known).
std::vector<VersionInfo> PlanRetention(const std::vector<VersionInfo>& versions, int keep);

}  // namespace baton::ckpt
