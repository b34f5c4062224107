#include "baton/runtime.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "baton/identity.h"
#include "baton/log.h"
#include "mpi_runtime/mpi_check.h"

namespace baton {
namespace {

constexpr const char* kComponent = "runtime";

// A node key from Slurm: SLURM_NODEID, else the plugin's NODE_RANK.
bool NodeKeyFromSlurm(long* key) {
  for (const char* name : {"SLURM_NODEID", "NODE_RANK"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    long k = std::strtol(v, &end, 10);
    if (*end == '\0' && k >= 0) {
      *key = k;
      return true;
    }
  }
  return false;
}

std::string ThreadLevelName(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return std::to_string(level);
}

}  // namespace

Status Runtime::Create(int* argc, char*** argv, const RuntimeOptions& options, std::unique_ptr<Runtime>* out) {
  std::unique_ptr<Runtime> rt(new Runtime());
  int initialized = 0, provided = MPI_THREAD_SINGLE;
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Initialized(&initialized)));
  if (!initialized) {
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided)));
    rt->finalize_ = true;
  } else {
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Query_thread(&provided)));
  }
  if (options.require_thread_multiple && provided < MPI_THREAD_MULTIPLE) {
    // rt's destructor finalizes MPI if we initialized it.
    return Status::Unavailable(kComponent, "MPI provides " + ThreadLevelName(provided) +
                                               " but baton needs MPI_THREAD_MULTIPLE (Open MPI built "
                                               "without thread support?)");
  }
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &rt->world_)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_set_errhandler(rt->world_, MPI_ERRORS_RETURN)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_rank(rt->world_, &rt->rank_)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_size(rt->world_, &rt->size_)));
  SetIdentityRank(rt->rank_);

  // Slurm's node ids are used only when every rank has one; otherwise
  // (mpirun, a partial environment) MPI's shared-memory split decides.
  long key = 0;
  int have = NodeKeyFromSlurm(&key) ? 1 : 0, all_have = 0;
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_MIN, rt->world_)));
  if (!all_have) {
    MPI_Comm shared;
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(
        MPI_Comm_split_type(rt->world_, MPI_COMM_TYPE_SHARED, rt->rank_, MPI_INFO_NULL, &shared)));
    int leader = rt->rank_;
    Status s = BATON_MPI_CHECK(MPI_Bcast(&leader, 1, MPI_INT, 0, shared));
    MPI_Comm_free(&shared);
    BATON_RETURN_IF_ERROR(s);
    key = leader;
  }
  std::vector<long> keys(static_cast<size_t>(rt->size_));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Allgather(&key, 1, MPI_LONG, keys.data(), 1, MPI_LONG, rt->world_)));
  rt->topology_ = TopologyFromNodeKeys(keys);

  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_split(rt->world_, rt->node_rank(), rt->rank_, &rt->node_)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_set_errhandler(rt->node_, MPI_ERRORS_RETURN)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_rank(rt->node_, &rt->local_rank_)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_size(rt->node_, &rt->local_size_)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(
      MPI_Comm_split(rt->world_, rt->local_rank_ == 0 ? 0 : MPI_UNDEFINED, rt->rank_, &rt->leaders_)));
  if (rt->leaders_ != MPI_COMM_NULL)
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_set_errhandler(rt->leaders_, MPI_ERRORS_RETURN)));

  BATON_LOG(kRuntime, debug) << "runtime: " << rt->size_ << " ranks on " << rt->num_nodes()
                             << " nodes; node " << rt->node_rank() << ", local rank " << rt->local_rank_
                             << " of " << rt->local_size_ << (all_have ? " (from Slurm)" : " (from MPI)");
  *out = std::move(rt);
  return Status::OK();
}

Runtime::~Runtime() {
  for (MPI_Comm* c : {&leaders_, &node_, &world_})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalize_ && !finalized) MPI_Finalize();
}

}  // namespace baton
