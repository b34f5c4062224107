// baton::Runtime: MPI start-up and the job's topology.
//
//   std::unique_ptr<baton::Runtime> rt;
//   baton::Status s = baton::Runtime::Create(&argc, &argv, {}, &rt);
//   if (!s.ok()) { std::cerr << s << "\n"; return 75; }   // 75: requeue me
//   rt->rank(); rt->node_rank(); rt->local_rank(); rt->node_comm(); ...
//
// Started from MPI_COMM_WORLD under `srun --mpi=pmix` or mpirun. Threading:
// MPI_THREAD_MULTIPLE is required (the heartbeat and async-save threads of
// later parts call MPI); a Runtime is created and destroyed on one thread.
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "baton/status.h"
#include "baton/topology.h"

namespace baton {

struct RuntimeOptions {
  // Fail unless MPI gives MPI_THREAD_MULTIPLE.
  bool require_thread_multiple = true;
};

class Runtime {
 public:
  // Initializes MPI if nobody did, reads the topology: the node from
  // SLURM_NODEID (or the plugin's NODE_RANK), else MPI_COMM_TYPE_SHARED.
  // Creates the world, node and leaders communicators. Collective.
  static Status Create(int* argc, char*** argv, const RuntimeOptions& options,
                       std::unique_ptr<Runtime>* out);
  ~Runtime();  // frees the communicators; finalizes MPI if Create initialized it
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int node_rank() const { return topology_.node_of[rank_]; }
  int num_nodes() const { return topology_.num_nodes(); }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  const Topology& topology() const { return topology_; }

  // Owned by the Runtime; errors return (MPI_ERRORS_RETURN), never abort.
  MPI_Comm world_comm() const { return world_; }
  MPI_Comm node_comm() const { return node_; }
  // Local rank 0 of every node; MPI_COMM_NULL on the other ranks.
  MPI_Comm leaders_comm() const { return leaders_; }

 private:
  Runtime() = default;
  int rank_ = 0, size_ = 0, local_rank_ = 0, local_size_ = 0;
  bool finalize_ = false;
  Topology topology_;
  MPI_Comm world_ = MPI_COMM_NULL, node_ = MPI_COMM_NULL, leaders_ = MPI_COMM_NULL;
};

}  // namespace baton
