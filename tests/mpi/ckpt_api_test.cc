// The Checkpointer's API as a new user meets it (issue 15, item 8): calls
// that are easy to get wrong are refused with a clear error before any
// data is written, and what a training program needs besides "restore the
// newest" is there: a chosen step, the metadata before allocating, a
// subset of the arrays, per-rank state.
//
// Run at 1, 3 and 8 ranks with the other ckpt tests (ckpt-np*.sh).
#include <mpi.h>

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "baton/checkpointer.h"
#include "ckpt/fs/fault_env.h"
#include "tests/mpi/ckpt_fixture.h"

namespace baton::ckpt_testing {
namespace {

using ckpt::fs::FaultEnv;

// Save(-1) on every rank, or on one rank only: refused on every rank
// (InvalidArgument naming the step), nothing created, and no rank hangs.
TEST_F(CkptTest, SaveOfANegativeStepIsRefusedBeforeAnyDataIsWritten) {
  for (int bad_rank : {-1, Size() - 1}) {  // -1: every rank passes -1
    FaultEnv env;
    CheckpointOptions o = Options();
    o.env = &env;
    auto ck = MakeCheckpointer(o);
    std::vector<float> w(4, 1.0f);
    EXPECT_TRUE(ck->RegisterReplicated("w", w.data(), DType::kF32, {4}).ok());
    env.ClearEvents();
    const int64_t step = bad_rank < 0 || Rank() == bad_rank ? -1 : 5;
    Status s = ck->Save(step);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("step -1"), std::string::npos) << s;
    for (const std::string& e : env.events()) EXPECT_EQ(e.rfind("create", 0), std::string::npos) << e;
    MPI_Barrier(MPI_COMM_WORLD);
    if (Rank() == 0) {
      EXPECT_TRUE(Versions(root_).empty());
    }
  }
}

}  // namespace
}  // namespace baton::ckpt_testing
