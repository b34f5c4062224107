// main() of the multi-rank GoogleTest suites (under mpirun or srun).
//
// Every rank runs every test; each rank writes its own result file, and
// the tally counts a test once, failed if it failed on any rank. Only rank
// 0 prints the usual progress; the other ranks print their failures,
// prefixed with their rank, so the log stays readable at 8 ranks.
#include <mpi.h>

#include <gtest/gtest.h>

#include <cstdio>

#include "baton/identity.h"
#include "tests/lib/tsv_result_writer.h"

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& part) override {
    if (!part.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 part.file_name() ? part.file_name() : "?", part.line_number(), part.message());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "MPI_Init_thread failed\n");
    return 1;
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  baton::SetIdentityRank(rank);

  ::testing::InitGoogleTest(&argc, argv);
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  baton::testing::InstallTsvResultWriter(rank);

  int rc = RUN_ALL_TESTS();
  // Every rank exits with the worst result, so the launcher's exit code
  // tells whether any rank failed.
  int worst = rc;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
