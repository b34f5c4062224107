// Launched by the cluster suite as `srun -N4 -n8 --mpi=pmix`: Open MPI
// under Slurm's PMIx across the four nodes of the local cluster.
#include <mpi.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "mpi_runtime/mpi_check.h"
#include "tests/lib/mpi_world.h"

namespace baton {
namespace {

int Rank() { return testing::WorldRank(); }
int Size() { return testing::WorldSize(); }

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

TEST(ClusterMpi, WorldMatchesTheSlurmStep) {
  EXPECT_EQ(std::to_string(Size()), Env("SLURM_NTASKS"));
  EXPECT_EQ(std::to_string(Rank()), Env("SLURM_PROCID"));
}

TEST(ClusterMpi, AllreduceGivesTheSumOnEveryRank) {
  std::vector<double> mine(1024), sum(1024);
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = Rank() + 0.5 * i;
  ASSERT_TRUE(BATON_MPI_CHECK(MPI_Allreduce(mine.data(), sum.data(), 1024, MPI_DOUBLE, MPI_SUM,
                                            MPI_COMM_WORLD))
                  .ok());
  const double p = Size();
  for (size_t i = 0; i < sum.size(); ++i) ASSERT_DOUBLE_EQ(sum[i], p * (p - 1) / 2 + p * 0.5 * i);
}

TEST(ClusterMpi, EveryRankRunsOnItsOwnNodeTwoPerNode) {
  char host[HOST_NAME_MAX + 1] = {};
  EXPECT_EQ(gethostname(host, HOST_NAME_MAX), 0);  // EXPECT: every rank must reach the allgather
  // The node Slurm placed this task on is the host it runs on (each slurmd
  // of the local cluster has its own UTS namespace).
  EXPECT_EQ(std::string(host), Env("SLURMD_NODENAME"));

  std::vector<char> all(static_cast<size_t>(Size()) * (HOST_NAME_MAX + 1));
  ASSERT_TRUE(BATON_MPI_CHECK(MPI_Allgather(host, HOST_NAME_MAX + 1, MPI_CHAR, all.data(),
                                            HOST_NAME_MAX + 1, MPI_CHAR, MPI_COMM_WORLD))
                  .ok());
  std::map<std::string, int> per_node;
  for (int r = 0; r < Size(); ++r) ++per_node[std::string(&all[r * (HOST_NAME_MAX + 1)])];
  const int nodes = std::atoi(Env("SLURM_STEP_NUM_NODES").c_str());
  ASSERT_EQ(static_cast<int>(per_node.size()), nodes);
  for (int k = 1; k <= nodes; ++k) {
    const std::string name = "n" + std::to_string(k);
    EXPECT_EQ(per_node[name], Size() / nodes) << "ranks on " << name;
  }
}

}  // namespace
}  // namespace baton
