#include "baton/identity.h"
#include "baton/status.h"

#include <gtest/gtest.h>

namespace baton {
namespace {

TEST(Identity, NothingKnownOutsideAJob) {
  Identity id = IdentityFromEnvironment({}, "login1");
  EXPECT_EQ(id.rank, -1);
  EXPECT_EQ(id.host, "login1");
  EXPECT_EQ(id.job, "");
  EXPECT_EQ(id.Describe(), "host login1");
}

TEST(Identity, SlurmTaskGivesRankAndJobStep) {
  Identity id = IdentityFromEnvironment(
      {{"SLURM_PROCID", "5"}, {"SLURM_JOB_ID", "17"}, {"SLURM_STEP_ID", "0"}}, "n3");
  EXPECT_EQ(id.rank, 5);
  EXPECT_EQ(id.job, "17.0");
  EXPECT_EQ(id.Describe(), "rank 5 on n3, job 17.0");
}

TEST(Identity, BatchScriptHasJobWithoutStep) {
  Identity id = IdentityFromEnvironment({{"SLURM_JOB_ID", "9"}}, "n1");
  EXPECT_EQ(id.job, "9");
  EXPECT_EQ(id.Describe(), "host n1, job 9");
}

TEST(Identity, RankVariablesInOrderOfPrecedence) {
  EXPECT_EQ(IdentityFromEnvironment({{"RANK", "2"}, {"SLURM_PROCID", "7"}}, "h").rank, 2);
  // A process mpirun started inside a Slurm step: the step numbers the
  // daemons (RANK, SLURM_PROCID = the node's index), the MPI library the processes.
  EXPECT_EQ(IdentityFromEnvironment({{"SLURM_PROCID", "1"}, {"OMPI_COMM_WORLD_RANK", "3"}}, "h").rank, 3);
  EXPECT_EQ(IdentityFromEnvironment({{"RANK", "1"}, {"OMPI_COMM_WORLD_RANK", "3"}}, "h").rank, 3);
  EXPECT_EQ(IdentityFromEnvironment({{"RANK", "1"}, {"PMI_RANK", "5"}}, "h").rank, 5) << "MPICH's Hydra";
  EXPECT_EQ(IdentityFromEnvironment({{"OMPI_COMM_WORLD_RANK", "3"}, {"PMIX_RANK", "4"}}, "h").rank, 3);
  EXPECT_EQ(IdentityFromEnvironment({{"PMIX_RANK", "4"}}, "h").rank, 4);
}

TEST(Identity, MalformedRankIsIgnoredNotTrusted) {
  // Someone else's RANK (or garbage) must not become ours; the next source wins.
  EXPECT_EQ(IdentityFromEnvironment({{"RANK", "-1"}, {"SLURM_PROCID", "6"}}, "h").rank, 6);
  EXPECT_EQ(IdentityFromEnvironment({{"RANK", "3x"}}, "h").rank, -1);
  EXPECT_EQ(IdentityFromEnvironment({{"RANK", ""}}, "h").rank, -1);
  EXPECT_EQ(IdentityFromEnvironment({{"RANK", "99999999999999"}}, "h").rank, -1);
}

// The rank set once the runtime knows it is the one every later error
// names (Status records where it was made).
TEST(Identity, SetRankReachesEveryLaterStatus) {
  SetIdentityRank(11);
  Status s = Status::IOError("ckpt", "disk full");
  EXPECT_NE(s.where().find("rank 11 on " + CurrentIdentity().host), std::string::npos) << s.where();
}

}  // namespace
}  // namespace baton
