// The one-rank NCCL communicator both GPU programs start from, without
// MPI: the device, a unique id made here (nothing to exchange), the world,
// node and leaders communicators (made on demand, as a hierarchical
// collective would), each creation under a 60 s deadline.
#pragma once

#include <chrono>
#include <memory>

#include "mpi_runtime/nccl/nccl_api.h"
#include "mpi_runtime/nccl/nccl_communicator.h"

namespace baton::nccl::gpu_test {

inline NcclOptions OneRankOptions() {
  NcclOptions options;
  options.init_timeout = std::chrono::seconds(60);
  options.op_timeout = std::chrono::seconds(60);
  return options;
}

inline Status MakeOneRankCommunicator(const NcclApi& api, std::unique_ptr<NcclCommunicator>* out,
                                      const NcclOptions& options = OneRankOptions()) {
  auto c = std::make_unique<NcclCommunicator>(api, options);
  ncclUniqueId id;
  Status s = c->SetUpDevice(0);
  if (s.ok()) s = BATON_NCCL_CHECK(api, api.GetUniqueId(&id));
  if (s.ok()) s = c->InitWorld(id, 0, 1);
  if (s.ok()) s = c->SplitNode(0);
  if (s.ok()) s = c->SplitLeaders(true);
  if (s.ok()) *out = std::move(c);
  return s;
}

}  // namespace baton::nccl::gpu_test
