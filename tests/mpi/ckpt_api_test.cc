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

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "baton/checkpointer.h"
#include "baton/dtype.h"
#include "baton/span.h"
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


// Typed registrations: the dtype follows the element type, the span's
// length is checked against the shape, and they round-trip.
TEST_F(CkptTest, TypedRegistrationsCheckTheLengthAndRoundTrip) {
  auto ck = MakeCheckpointer(Options());
  const uint64_t rows = 2, cols = 3;
  std::vector<float> w(rows * cols);
  std::vector<int64_t> counts(4);
  std::vector<uint16_t> emb(2 * 2);  // bf16 bits
  std::array<double, 1> lr{};
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(Rank() * 10 + static_cast<int>(i));
  for (size_t i = 0; i < counts.size(); ++i) counts[i] = static_cast<int64_t>(i) * 1000;
  for (size_t i = 0; i < emb.size(); ++i) emb[i] = FloatToBFloat16(static_cast<float>(i) + 0.5f);
  lr[0] = 0.125;
  const uint64_t n = rows * static_cast<uint64_t>(Size());
  EXPECT_TRUE(ck->RegisterSharded("w", w, {n, cols}, rows * static_cast<uint64_t>(Rank()), rows).ok());
  EXPECT_TRUE(ck->RegisterReplicated("counts", counts, {4}).ok());
  EXPECT_TRUE(ck->RegisterReplicated("emb", Span<uint16_t>(emb), DType::kBF16, {2, 2}).ok());
  EXPECT_TRUE(ck->RegisterReplicated("lr", lr, {}).ok());

  // Wrong lengths and element sizes, each naming what is wrong.
  std::vector<float> five(5);
  Status s = ck->RegisterReplicated("bad", five, {2, 3});
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("5 elements given, shape [2,3] hold 6"), std::string::npos) << s;
  s = ck->RegisterSharded("bad", five, {n, cols}, 0, rows);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("5 elements given, 2 rows of shape [" + std::to_string(n) + ",3] hold 6"),
            std::string::npos)
      << s;
  s = ck->RegisterReplicated("bad", Span<uint16_t>(emb), DType::kF32, {4});
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("elements of 2 bytes given as f32 (4 bytes)"), std::string::npos) << s;

  s = ck->Save(1);
  ASSERT_TRUE(AllRanks(s.ok())) << s;
  ckpt::Manifest m;
  ASSERT_TRUE(ReadManifest(ck->last_stats().version_path, &m).ok());
  std::map<std::string, DType> dtypes;
  for (const ckpt::ArrayMeta& a : m.arrays) dtypes[a.name] = a.dtype;
  EXPECT_EQ(dtypes.size(), 4u) << "the refused registrations are not there";
  EXPECT_EQ(dtypes["w"], DType::kF32);
  EXPECT_EQ(dtypes["counts"], DType::kI64);
  EXPECT_EQ(dtypes["emb"], DType::kBF16);
  EXPECT_EQ(dtypes["lr"], DType::kF64);

  const std::vector<float> w0 = w;
  const std::vector<int64_t> counts0 = counts;
  const std::vector<uint16_t> emb0 = emb;
  std::fill(w.begin(), w.end(), 0.0f);
  std::fill(counts.begin(), counts.end(), 0);
  std::fill(emb.begin(), emb.end(), 0);
  lr[0] = 0;
  std::optional<int64_t> step;
  s = ck->Restore(&step);
  ASSERT_TRUE(AllRanks(s.ok())) << s;
  EXPECT_EQ(w, w0);
  EXPECT_EQ(counts, counts0);
  EXPECT_EQ(emb, emb0);
  EXPECT_EQ(lr[0], 0.125);
}


// Replicas that drifted apart (here: every rank's copy differs from rank
// 0's) fail the Save on every rank, naming the array and the ranks, with
// nothing written; unchecked (verify_replicas false) they are stitched.
TEST_F(CkptTest, ReplicasThatDifferAreRefusedAtSave) {
  if (Size() == 1) GTEST_SKIP() << "needs two ranks";
  for (bool verify : {true, false}) {
    CheckpointOptions o = Options();
    o.verify_replicas = verify;
    auto ck = MakeCheckpointer(o);
    std::vector<int64_t> same(4, 7), bias(2 * static_cast<size_t>(Size()), Rank() == 0 ? 0 : 1);
    EXPECT_TRUE(ck->RegisterReplicated("same", same, {4}).ok());
    EXPECT_TRUE(ck->RegisterReplicated("bias", bias, {bias.size()}).ok());
    Status s = ck->Save(1);
    if (!verify) {
      EXPECT_TRUE(AllRanks(s.ok())) << s;
      continue;
    }
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("replicated array bias differs between ranks (2 different copies"), std::string::npos)
        << s;
    EXPECT_NE(s.message().find("rank 0 holds xxh3 "), std::string::npos) << s;
    EXPECT_NE(s.message().find(Size() == 2 ? std::string("rank 1 holds") : "ranks 1,2"), std::string::npos) << s;
    MPI_Barrier(MPI_COMM_WORLD);
    if (Rank() == 0) {
      EXPECT_TRUE(Versions(root_).empty());
    }
  }
}

}  // namespace
}  // namespace baton::ckpt_testing
