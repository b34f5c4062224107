// The Checkpointer's API as a new user meets it (issue 15, item 8): calls
// that are easy to get wrong are refused with a clear error before any
// data is written, and what a training program needs besides "restore the
// newest" is there: a chosen step, the metadata before allocating, a
// subset of the arrays, per-rank state.
//
// Run at 1, 3 and 8 ranks with the other ckpt tests (ckpt-np*.sh).
#include <hdf5.h>
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


// A scalar (shape {}) is stored as an HDF5 scalar dataset, as h5py and
// h5dump show it, not as a one-element array; it restores.
TEST_F(CkptTest, AScalarIsStoredWithAScalarDataspace) {
  auto ck = MakeCheckpointer(Options(Size()));  // one shard: shard-0.h5
  int64_t cursor = 12345;
  double lr = 0.25;
  EXPECT_TRUE(ck->RegisterReplicated("cursor", &cursor, DType::kI64, {}).ok());
  EXPECT_TRUE(ck->RegisterReplicated("lr", &lr, DType::kF64, {}).ok());
  Status s = ck->Save(3);
  ASSERT_TRUE(AllRanks(s.ok())) << s;
  if (Rank() == 0) {
    const std::string file = ck->last_stats().version_path + "/shard-0.h5";
    hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0) << file;
    for (const char* name : {"cursor", "lr"}) {
      hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
      EXPECT_GE(d, 0) << name;
      hid_t space = H5Dget_space(d);
      EXPECT_EQ(H5Sget_simple_extent_type(space), H5S_SCALAR) << name;
      EXPECT_EQ(H5Sget_simple_extent_ndims(space), 0) << name;
      H5Sclose(space);
      H5Dclose(d);
    }
    H5Fclose(f);
  }
  cursor = 0;
  lr = 0;
  std::optional<int64_t> step;
  s = ck->Restore(&step);
  ASSERT_TRUE(AllRanks(s.ok())) << s;
  EXPECT_EQ(cursor, 12345);
  EXPECT_EQ(lr, 0.25);
}

}  // namespace
}  // namespace baton::ckpt_testing
