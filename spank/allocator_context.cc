// sbatch and salloc (allocator context): check the options before the job
// is submitted and record the resolved choice in the job's environment, so
// that the batch script's step and every srun inside it see the same.
#include <cstdlib>

#include "base/launch/component.h"
#include "spank/plugin.h"

namespace baton::spank {

Status AllocatorInitPostOpt(spank_t) {
  launch::LaunchOptions resolved;
  BATON_RETURN_IF_ERROR(ResolveSubmitOptions(&resolved));
  for (const auto& [name, value] : launch::OptionsAsEnvironment(resolved)) {
    if (setenv(name.c_str(), value.c_str(), 1) != 0)
      return Status::IOError(launch::kComponent, "setenv(" + name + ") failed");
  }
  return Status::OK();
}

}  // namespace baton::spank
