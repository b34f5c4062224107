// sbatch and salloc (allocator context): check the options before the job
// is submitted and record the resolved choice in the job's environment, so
// that the batch script's step and every srun inside it see the same.
#include "spank/plugin.h"

namespace baton::spank {

Status AllocatorInitPostOpt(spank_t) { return ExportResolvedOptions(); }

}  // namespace baton::spank
