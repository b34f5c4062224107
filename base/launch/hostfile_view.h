// The hostfile as the tasks see it. user_init writes it from slurmstepd,
// which may live in another mount namespace than the tasks: Slurm's
// job_container/tmpfs gives each job a private /tmp (and /dev/shm) that
// tasks join, while user_init runs outside it unless the site sets
// SlurmdParameters=contain_spank (Slurm 23.02 and later). The tasks would
// then find nothing at BATON_HOSTFILE. task_init runs in the task, inside
// its namespace, and makes the path name the same text there.
#pragma once

#include <string>

#include "base/launch/safe_dir.h"
#include "baton/status.h"

namespace baton::launch {

// Whether `dir.path` names, in this process's mount namespace, the
// directory `dir` was opened as (same device and inode). A missing path is
// not an error: *same is false.
Status SeenAtItsPath(const OpenDir& dir, bool* same);

// Makes "<dir_path>/<name>" hold `content` in this process's view, where
// every task of the node may call it at the same moment: the directory is
// made under a fresh name with the file in it, then renamed into place
// (never half there); a task that finds it in place already checks it
// (the safety rule of OpenSafeDir, the file a regular one) and leaves it.
// The parent's missing components are made (mode 0700).
Status PlaceInThisView(const std::string& dir_path, const std::string& name, const std::string& content);

}  // namespace baton::launch
