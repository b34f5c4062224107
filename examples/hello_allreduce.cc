// The first multi-node job: every rank says where it runs, all ranks
// all-reduce their ranks, and each checks the sum. Run by scripts/demo as
//   sbatch -N4 examples/first-job.sbatch
#include <mpi.h>

#include <cstdio>

#include "baton/identity.h"
#include "baton/log.h"
#include "mpi_runtime/mpi_check.h"

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return 1;
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  baton::SetIdentityRank(rank);

  long long mine = rank, sum = -1;
  baton::Status s = BATON_MPI_CHECK(
      MPI_Allreduce(&mine, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
  const long long expected = static_cast<long long>(size) * (size - 1) / 2;
  int rc = 0;
  if (!s.ok()) {
    BATON_LOG(kRuntime, error) << s;
    rc = 1;
  } else if (sum != expected) {
    BATON_LOG(kRuntime, error) << "all-reduce gave " << sum << ", expected " << expected;
    rc = 1;
  } else {
    BATON_LOG(kRuntime, info) << "one of " << size << " ranks; all-reduce of ranks = " << sum
                              << " (correct)";
  }
  MPI_Finalize();
  return rc;
}
