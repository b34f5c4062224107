// CreateCommunicator: picks the backend, and the names of backends and
// algorithms.
#include "baton/communicator.h"

#include <string>

#include "baton_config.h"
#include "mpi_runtime/mpi/mpi_communicator.h"
#if BATON_HAVE_NCCL
#include "mpi_runtime/nccl/nccl_communicator.h"
#endif

namespace baton {

std::string_view BackendName(Backend b) {
  switch (b) {
    case Backend::kMpi: return "mpi";
    case Backend::kNccl: return "nccl";
    case Backend::kAuto: return "auto";
  }
  return "?";
}

std::string_view AlgorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::kNative: return "native";
    case Algorithm::kHierarchical: return "hierarchical";
    case Algorithm::kRing: return "ring";
    case Algorithm::kAuto: return "auto";
  }
  return "?";
}

Status ParseBackend(std::string_view text, Backend* b) {
  for (Backend x : {Backend::kMpi, Backend::kNccl, Backend::kAuto})
    if (text == BackendName(x)) return *b = x, Status::OK();
  return Status::InvalidArgument("runtime", "backend '" + std::string(text) + "' is not one of mpi, nccl, auto");
}

Status ParseAlgorithm(std::string_view text, Algorithm* a) {
  for (Algorithm x : {Algorithm::kNative, Algorithm::kHierarchical, Algorithm::kRing, Algorithm::kAuto})
    if (text == AlgorithmName(x)) return *a = x, Status::OK();
  return Status::InvalidArgument("runtime", "algorithm '" + std::string(text) +
                                                "' is not one of native, hierarchical, ring, auto");
}

Status CreateCommunicator(Runtime& runtime, const CommOptions& options, std::unique_ptr<Communicator>* out) {
  switch (options.backend) {
    case Backend::kMpi:
      return mpi::CreateMpiCommunicator(runtime, options, out);
    case Backend::kNccl:
#if BATON_HAVE_NCCL
      return nccl::CreateNcclCommunicator(runtime, options, nccl::RealNcclApi(), out);
#else
      return Status::Unavailable("runtime", "backend nccl: this baton was built without NCCL (configure found no CUDA/NCCL)");
#endif
    case Backend::kAuto:
#if BATON_HAVE_NCCL
      // Every rank must choose the same backend: nccl only if all see a GPU.
      {
        int mine = nccl::NcclDeviceVisible(nccl::RealNcclApi()) ? 1 : 0, all = 0;
        if (MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, runtime.world_comm()) != MPI_SUCCESS)
          return Status::IOError("runtime", "MPI_Allreduce choosing the backend failed");
        if (all) return nccl::CreateNcclCommunicator(runtime, options, nccl::RealNcclApi(), out);
      }
#endif
      return mpi::CreateMpiCommunicator(runtime, options, out);
  }
  return Status::InvalidArgument("runtime", "unknown backend");
}

}  // namespace baton
