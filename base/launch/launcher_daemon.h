// Steps that are a launcher's own daemons. Open MPI's mpirun, run inside an
// allocation, starts its daemons with `srun ... orted` (Open MPI 4) or
// `srun ... prted` (Open MPI 5, PRRTE); MPICH's and Intel MPI's Hydra with
// `srun ... hydra_pmi_proxy` / `hydra_bstrap_proxy`. Such a step inherits
// the batch script's BATON_ENABLE=on, but its tasks are one daemon per node,
// not the job's ranks: RANK there would be the node's index, and the
// processes the daemon starts would inherit it. The launcher gives its
// processes their ranks; baton gives such a step nothing.
#pragma once

#include <string_view>

namespace baton::launch {

// True when `argv0` (the step's command, as srun was given it) is a
// launcher's daemon, by its file name.
inline bool IsLauncherDaemon(std::string_view argv0) {
  const size_t slash = argv0.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? argv0 : argv0.substr(slash + 1);
  for (std::string_view daemon : {"orted", "prted", "hydra_pmi_proxy", "hydra_bstrap_proxy"})
    if (name == daemon) return true;
  return false;
}

}  // namespace baton::launch
