// CreateCommunicator: picks the backend (the names of backends and
// algorithms are in communicator_names.cc).
#include "baton/communicator.h"

#include <memory>
#include <string>

#include "baton_config.h"
#include "mpi_runtime/deadline.h"
#include "mpi_runtime/mpi/mpi_communicator.h"
#include "mpi_runtime/mpi_check.h"
#include "mpi_runtime/setup_guard.h"
#if BATON_HAVE_NCCL
#include "mpi_runtime/nccl/buffer_location.h"
#include "mpi_runtime/nccl/nccl_communicator.h"
#endif

namespace baton {

namespace {

// The mpi backend's check that its buffers are host memory: CUDA's
// pointer attributes where baton was built with CUDA and the CUDA runtime
// loads here (where it does not, no memory is device memory).
mpi::BufferCheck HostCheck() {
#if BATON_HAVE_NCCL
  const nccl::NcclApi* cuda = nullptr;
  if (!nccl::RealCudaApi(&cuda).ok()) return nullptr;
  return nccl::MakeHostBufferCheck(*cuda);
#else
  return nullptr;
#endif
}

}  // namespace

Status CreateCommunicator(Runtime& runtime, const CommOptions& options, std::unique_ptr<Communicator>* out) {
  // Checked whatever the backend, so that a bad BATON_ALGORITHM is named
  // on every machine alike (nccl picks its own algorithms).
  Algorithm algorithm = Algorithm::kNative;
  BATON_RETURN_IF_ERROR(ResolveAlgorithm(options.algorithm, &algorithm));
  switch (options.backend) {
    case Backend::kMpi:
      return mpi::CreateMpiCommunicator(runtime, options, HostCheck(), out);
    case Backend::kNccl:
#if BATON_HAVE_NCCL
    {
      const nccl::NcclApi* api = nullptr;
      BATON_RETURN_IF_ERROR(nccl::RealNcclApi(&api));
      return nccl::CreateNcclCommunicator(runtime, options, *api, out);
    }
#else
      return Status::Unavailable("runtime", "backend nccl: this baton was built without NCCL (configure found no CUDA/NCCL)");
#endif
    case Backend::kAuto:
#if BATON_HAVE_NCCL
      // Every rank must choose the same backend: nccl only if all see a GPU.
      {
        double seconds = 0;
        BATON_RETURN_IF_ERROR(mpi::ResolveCollectiveTimeout(options.timeout, &seconds));
        // Owned by the step: after a timeout under kReturn it may still run.
        auto all = std::make_shared<int>(0);
        // A rank where NCCL or CUDA does not load sees no GPU.
        const nccl::NcclApi* api = nullptr;
        const int mine = nccl::RealNcclApi(&api).ok() && nccl::NcclDeviceVisible(*api) ? 1 : 0;
        const MPI_Comm world = runtime.world_comm();
        mpi::SetupGuard guard(seconds, options.on_timeout, &runtime, "creating the communicator");
        BATON_RETURN_IF_ERROR(guard.Run([all, mine, world](const mpi::SetupGuard::Steps& step) {
          step("MPI_Allreduce (whether every rank sees a GPU)");
          return BATON_MPI_CHECK(MPI_Allreduce(&mine, all.get(), 1, MPI_INT, MPI_MIN, world));
        }));
        if (*all) return nccl::CreateNcclCommunicator(runtime, options, *api, out);
      }
#endif
      return mpi::CreateMpiCommunicator(runtime, options, HostCheck(), out);
  }
  return Status::InvalidArgument("runtime", "unknown backend");
}

}  // namespace baton
