// Multi-rank tests of the MPI layer every later part stands on: the
// harness itself (all ranks run, results agree), the MPI check helper, and
// the identity the runtime sets from MPI_COMM_WORLD. Run at 1, 2, 3 and 8
// ranks by make check.
#include <mpi.h>

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "baton/identity.h"
#include "mpi_runtime/mpi_check.h"
#include "tests/lib/mpi_world.h"

namespace baton {
namespace {

int Rank() { return testing::WorldRank(); }
int Size() { return testing::WorldSize(); }

TEST(MpiBasics, ThreadMultipleIsProvided) {
  int provided = 0;
  ASSERT_EQ(MPI_Query_thread(&provided), MPI_SUCCESS);
  EXPECT_EQ(provided, MPI_THREAD_MULTIPLE);
}

TEST(MpiBasics, IdentityRankIsTheWorldRank) { EXPECT_EQ(CurrentIdentity().rank, Rank()); }

class AllreduceSum : public ::testing::TestWithParam<int> {};

TEST_P(AllreduceSum, EveryRankGetsTheSum) {
  const int n = GetParam();
  std::vector<long long> mine(n), sum(n, -1);
  for (int i = 0; i < n; ++i) mine[i] = static_cast<long long>(Rank()) * 1000 + i;
  ASSERT_TRUE(BATON_MPI_CHECK(MPI_Allreduce(mine.data(), sum.data(), n, MPI_LONG_LONG, MPI_SUM,
                                            MPI_COMM_WORLD))
                  .ok());
  const long long p = Size();
  for (int i = 0; i < n; ++i) ASSERT_EQ(sum[i], 1000 * p * (p - 1) / 2 + p * i) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(Sizes, AllreduceSum, ::testing::Values(0, 1, 7, 1 << 16));

TEST(MpiCheck, SuccessIsOk) { EXPECT_TRUE(BATON_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD)).ok()); }

TEST(MpiCheck, FailureNamesTheCallTheErrorAndTheLine) {
  // A communicator of our own with MPI_ERRORS_RETURN: the error comes back
  // instead of aborting the job, and the check helper turns it into a Status.
  MPI_Comm comm;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), MPI_SUCCESS);
  int value = 1, out = 0;
  // A negative count is an error every MPI must report.
  Status s = BATON_MPI_CHECK(MPI_Allreduce(&value, &out, -1, MPI_INT, MPI_SUM, comm));
  MPI_Comm_free(&comm);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.component(), "runtime");
  EXPECT_NE(s.message().find("MPI_Allreduce failed with error"), std::string::npos) << s;
  EXPECT_NE(s.message().find("mpi_basics_test.cc:"), std::string::npos) << s;
  EXPECT_NE(s.where().find("rank " + std::to_string(Rank())), std::string::npos) << s;
}

}  // namespace
}  // namespace baton
