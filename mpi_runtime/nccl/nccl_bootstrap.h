// Bootstrapping the nccl backend from MPI: the unique-id exchange and the
// agreement across ranks after each step of creation. The MPI half of the
// backend (nccl_communicator.h is the MPI-free half); CreateNcclCommunicator
// is declared there and defined here.
#pragma once

#include <mpi.h>

#include <chrono>
#include <memory>
#include <string_view>

#include "baton/status.h"
#include "mpi_runtime/nccl/nccl_api.h"
#include "mpi_runtime/nccl/nccl_communicator.h"

namespace baton::nccl {

// Every MPI call of the bootstrap is non-blocking and polled against
// `timeout` (BootstrapNccl: twice NcclOptions::init_timeout, since the
// slowest rank may spend init_timeout in a NCCL step before it comes): a
// rank that never comes costs a Status::Timeout naming the step, not a
// hang; the call is then left in flight with its (leaked) buffers.
//
// Rank 0 of `comm` calls ncclGetUniqueId, MPI_Ibcast gives every rank its
// bytes. Every rank takes part even when rank 0's call failed (then the
// id is zeros and rank 0 returns the failure; pass the result through
// AgreeOnSuccess so that the others learn of it).
Status ExchangeUniqueId(const NcclApi& api, MPI_Comm comm, ncclUniqueId* id, std::chrono::milliseconds timeout);

// One outcome for every rank of `comm` from each rank's own: OK when every
// rank's `local` is OK; else a rank that failed returns its own Status,
// and the others Aborted, naming the lowest failed rank, `step` and that
// rank's message. Collective (an MPI_Iallreduce, plus an MPI_Ibcast of the
// message when some rank failed), each under `timeout`.
Status AgreeOnSuccess(MPI_Comm comm, const Status& local, std::string_view step, std::chrono::milliseconds timeout);

// Where this rank sits, as the Runtime knows it.
struct NcclPlacement {
  int rank = 0, size = 1;
  int local_rank = 0;
  int node = 0;         // dense node id
  bool leader = false;  // local rank 0 of its node
};

// CreateNcclCommunicator without the Runtime: device, id exchange, world,
// node and leaders communicators, with AgreeOnSuccess after each step and
// every NCCL communicator aborted on any failure. Collective over `world`.
Status BootstrapNccl(MPI_Comm world, const NcclPlacement& placement, const NcclOptions& options,
                     const NcclApi& api, std::unique_ptr<NcclCommunicator>* out);

}  // namespace baton::nccl
