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

#include <unistd.h>

#include <algorithm>
#include <fstream>
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

// Rank 0's pid on every rank (rank 0 holds the writer lock).
int BcastPid() {
  int pid = getpid();
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return pid;
}

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
  std::vector<uint64_t> dims33(33, 1);
  s = ck->RegisterReplicated("bad", five.data(), DType::kF32, dims33);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("33 dimensions, more than HDF5's 32"), std::string::npos) << s;
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


// Three versions; a restore of step 2 takes step 2, not the newest; a step
// never saved is NotFound naming it and the newest step.
TEST_F(CkptTest, RestoreOfAChosenStep) {
  auto ck = MakeCheckpointer(Options());
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(AllRanks(RegisterAll(ck.get(), &arrays).ok()));
  for (int64_t step = 1; step <= 3; ++step) {
    FillAll(&arrays, step);
    ASSERT_TRUE(AllRanks(ck->Save(step).ok()));
  }
  ZeroAll(&arrays);
  RestoreOptions o;
  o.step = 2;
  RestoreResult result;
  Status s = ck->Restore(o, &result);
  ASSERT_TRUE(AllRanks(s.ok())) << s;
  EXPECT_EQ(result.step, std::optional<int64_t>(2));
  EXPECT_EQ(CheckAll(arrays, 2), "");
  EXPECT_TRUE(result.fallbacks.empty());

  o.step = 7;
  s = ck->Restore(o, &result);
  EXPECT_EQ(s.code(), Code::kNotFound) << s;
  EXPECT_NE(s.message().find("no committed version of step 7"), std::string::npos) << s;
  EXPECT_NE(s.message().find("the newest is step 3"), std::string::npos) << s;
  // Every rank: rank 0's listing, named as its (rank 0 lists; the others
  // learn its outcome with the first candidate's broadcast).
  EXPECT_NE(s.message().find("rank 0: no committed version of step 7"), std::string::npos) << s;
  o.step = -2;
  s = ck->Restore(o, &result);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
}

// A checkpoint directory whose parents do not exist: they are made (as
// DCP's users expect), and the version restores from there; a parent that
// is a file fails naming it.
TEST_F(CkptTest, TheMissingParentsOfTheDirectoryAreMade) {
  CheckpointOptions o = Options();
  o.dir = root_ + "/a/b/ck";
  auto ck = MakeCheckpointer(o);
  ASSERT_TRUE(AllRanks(ck != nullptr));
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(AllRanks(RegisterAll(ck.get(), &arrays).ok()));
  FillAll(&arrays, 1);
  ASSERT_TRUE(AllRanks(ck->Save(1).ok()));
  ZeroAll(&arrays);
  RestoreResult result;
  Status s = ck->Restore(RestoreOptions(), &result);
  ASSERT_TRUE(AllRanks(s.ok())) << s;
  EXPECT_EQ(result.step, std::optional<int64_t>(1));
  EXPECT_EQ(CheckAll(arrays, 1), "");
  EXPECT_TRUE(stdfs::is_directory(root_ + "/a/b/ck"));
  ck.reset();
  if (Rank() == 0) std::ofstream(root_ + "/file") << "x";
  MPI_Barrier(MPI_COMM_WORLD);
  o.dir = root_ + "/file/sub/ck";
  std::unique_ptr<Checkpointer> bad;
  s = Checkpointer::Create(*testing::g_runtime, o, &bad);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(root_ + "/file"), std::string::npos) << s;
}

// A program that does not know the shapes yet reads them first, allocates,
// registers and restores; nothing saved: nullopt.
TEST_F(CkptTest, ReadMetadataBeforeAllocating) {
  {
    auto empty = MakeCheckpointer(Options());
    std::optional<CheckpointMetadata> md;
    Status s = empty->ReadMetadata(RestoreOptions(), &md);
    ASSERT_TRUE(AllRanks(s.ok())) << s;
    EXPECT_FALSE(md.has_value());
  }
  auto arrays = MakeArrays(Size(), Rank());
  {
    auto ck = MakeCheckpointer(Options());
    ASSERT_TRUE(AllRanks(RegisterAll(ck.get(), &arrays).ok()));
    FillAll(&arrays, 5);
    EXPECT_TRUE(ck->SetUserBlob("loader").ok());
    ASSERT_TRUE(AllRanks(ck->Save(5).ok()));
  }
  auto ck = MakeCheckpointer(Options());
  std::optional<CheckpointMetadata> md;
  Status s = ck->ReadMetadata(RestoreOptions(), &md);
  ASSERT_TRUE(AllRanks(s.ok() && md.has_value())) << s;
  EXPECT_EQ(md->step, 5);
  EXPECT_EQ(md->world_size, Size());
  EXPECT_EQ(md->user_blob_bytes, 6u);
  EXPECT_EQ(md->user_blob, "loader");
  EXPECT_TRUE(md->skipped.empty());
  EXPECT_FALSE(md->has_rank_state);
  ASSERT_EQ(md->arrays.size(), arrays.size());
  // Allocate from the metadata alone: replicated whole, sharded evenly.
  std::vector<std::vector<char>> bufs;
  for (const CheckpointArray& a : md->arrays) {
    uint64_t row_elems = 1;
    for (size_t d = 1; d < a.shape.size(); ++d) row_elems *= a.shape[d];
    const uint64_t rows = a.shape.empty() ? 1 : a.shape[0];
    uint64_t first = 0, mine = rows;
    if (!a.replicated) EvenSplit(rows, Size(), Rank(), &first, &mine);
    bufs.emplace_back(std::max<uint64_t>(1, mine * row_elems) * DTypeSize(a.dtype));
    s = a.replicated ? ck->RegisterReplicated(a.name, bufs.back().data(), a.dtype, a.shape)
                     : ck->RegisterSharded(a.name, bufs.back().data(), a.dtype, a.shape, first, mine);
    EXPECT_TRUE(s.ok()) << s;
  }
  std::optional<int64_t> step;
  s = ck->Restore(&step);
  ASSERT_TRUE(AllRanks(s.ok())) << s;
  EXPECT_EQ(step, std::optional<int64_t>(5));
  for (size_t i = 0; i < md->arrays.size(); ++i) {
    // arrays (by name) and the metadata (in the manifest's name order) hold the same arrays.
    for (size_t j = 0; j < arrays.size(); ++j) {
      if (arrays[j].name == md->arrays[i].name) {
        EXPECT_EQ(bufs[i], arrays[j].Expected(static_cast<int>(j), 5)) << arrays[j].name;
      }
    }
  }
}

// Fine-tuning and evaluation: a subset of the saved arrays is restored,
// the other registered arrays are left alone, the version's others ignored.
TEST_F(CkptTest, PartialRestoreOfSomeArrays) {
  auto arrays = MakeArrays(Size(), Rank());
  {
    auto ck = MakeCheckpointer(Options());
    ASSERT_TRUE(AllRanks(RegisterAll(ck.get(), &arrays).ok()));
    FillAll(&arrays, 4);
    ASSERT_TRUE(AllRanks(ck->Save(4).ok()));
  }
  auto ck = MakeCheckpointer(Options());
  // Registered: two of the saved arrays and a new head the version lacks.
  TestArray& w = arrays[1];   // s_f32, sharded
  TestArray& b = arrays[2];   // r_f64, replicated
  std::vector<float> head(3, 9.0f);
  std::fill(w.buf.begin(), w.buf.end(), 0);
  std::fill(b.buf.begin(), b.buf.end(), 0);
  EXPECT_TRUE(ck->RegisterSharded(w.name, w.buf.data(), w.dtype, w.shape, w.first_row, w.rows).ok());
  EXPECT_TRUE(ck->RegisterReplicated(b.name, b.buf.data(), b.dtype, b.shape).ok());
  EXPECT_TRUE(ck->RegisterReplicated("head", head, {3}).ok());
  RestoreOptions o;
  o.arrays = {w.name};
  RestoreResult result;
  Status s = ck->Restore(o, &result);
  ASSERT_TRUE(AllRanks(s.ok())) << s;
  EXPECT_EQ(result.step, std::optional<int64_t>(4));
  EXPECT_EQ(w.buf, w.Expected(1, 4));
  EXPECT_EQ(b.buf, std::vector<char>(b.buf.size(), 0)) << "not asked for, yet restored";
  EXPECT_EQ(head, std::vector<float>(3, 9.0f));

  o.arrays = {w.name, b.name};
  s = ck->Restore(o, &result);
  ASSERT_TRUE(AllRanks(s.ok())) << s;
  EXPECT_EQ(b.buf, b.Expected(2, 4));

  o.arrays = {"head"};  // registered, not in the version
  s = ck->Restore(o, &result);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("head: registered, not in the checkpoint"), std::string::npos) << s;
  o.arrays = {"nope"};  // not registered
  s = ck->Restore(o, &result);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("array nope is not registered"), std::string::npos) << s;
  o.arrays = {w.name, b.name, w.name};  // a name twice, not next to itself (a set finds it: CheckRestoreOptions)
  s = ck->Restore(o, &result);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("array " + w.name + " is named twice"), std::string::npos) << s;
}

// Per-rank state: each rank's own bytes (of its own length, one rank's
// empty) go back to the same rank.
TEST_F(CkptTest, PerRankStateGoesBackToTheSameRank) {
  auto ck = MakeCheckpointer(Options(2));
  std::vector<float> w(4, 1.0f);
  EXPECT_TRUE(ck->RegisterReplicated("w", w, {4}).ok());
  auto state_of = [](int rank) {
    return rank == 1 ? std::string() : "rng of rank " + std::to_string(rank) + std::string(rank * 100, 'x');
  };
  EXPECT_TRUE(ck->SetRankState(state_of(Rank())).ok());
  EXPECT_EQ(ck->SetRankState(std::string((64u << 20) + 1, 'x')).code(), Code::kInvalidArgument);
  Status s = ck->Save(8);
  ASSERT_TRUE(AllRanks(s.ok())) << s;

  ck.reset();  // one Checkpointer per directory at a time
  auto fresh = MakeCheckpointer(Options());
  EXPECT_TRUE(fresh->RegisterReplicated("w", w, {4}).ok());
  std::optional<CheckpointMetadata> md;
  ASSERT_TRUE(AllRanks(fresh->ReadMetadata(RestoreOptions(), &md).ok() && md.has_value()));
  EXPECT_TRUE(md->has_rank_state);
  EXPECT_EQ(md->arrays.size(), 1u) << "the rank state is not one of the user's arrays";
  RestoreResult result;
  s = fresh->Restore(RestoreOptions(), &result);
  ASSERT_TRUE(AllRanks(s.ok())) << s;
  EXPECT_EQ(fresh->rank_state(), state_of(Rank()));
  EXPECT_FALSE(result.rank_state_dropped);
  // A name of baton's own cannot be registered.
  s = fresh->RegisterReplicated(".rank_state", w, {4});
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
}


// One Checkpointer per directory: a second one, in this process or
// another, is refused on every rank, naming the holder; once the first is
// gone the directory is free (a requeue, a chained job).
TEST_F(CkptTest, ASecondLiveWriterIsRefused) {
  auto first = MakeCheckpointer(Options());
  std::unique_ptr<Checkpointer> second;
  Status s = Checkpointer::Create(*testing::g_runtime, Options(), &second);
  EXPECT_EQ(s.code(), Code::kUnavailable) << s;
  EXPECT_NE(s.message().find("has another live writer"), std::string::npos) << s;
  EXPECT_NE(s.message().find("locked by pid " + std::to_string(BcastPid())), std::string::npos) << s;
  EXPECT_EQ(second, nullptr);
  first.reset();
  s = Checkpointer::Create(*testing::g_runtime, Options(), &second);
  EXPECT_TRUE(AllRanks(s.ok())) << s;
}

// The run id: made once and kept (the next job of the chain gets the same),
// written into every manifest; another one is refused; a version of
// another run is skipped, not counted.
TEST_F(CkptTest, TheRunIdIsKeptAndChecked) {
  std::string id;
  std::vector<int64_t> w(8, 1);
  {
    auto ck = MakeCheckpointer(Options());
    id = ck->run_id();
    EXPECT_EQ(id.size(), 32u) << id;
    EXPECT_EQ(BcastString(id), id) << "every rank has the same run id";
    EXPECT_TRUE(ck->RegisterReplicated("w", w, {8}).ok());
    ASSERT_TRUE(AllRanks(ck->Save(1).ok()));
    ASSERT_TRUE(AllRanks(ck->Save(2).ok()));
    ckpt::Manifest m;
    ASSERT_TRUE(ReadManifest(ck->last_stats().version_path, &m).ok());
    EXPECT_EQ(m.run_id, id);
  }
  CheckpointOptions o = Options();
  o.run_id = "another-experiment";
  std::unique_ptr<Checkpointer> other;
  Status s = Checkpointer::Create(*testing::g_runtime, o, &other);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("belongs to run " + id + ", not to run another-experiment"), std::string::npos) << s;

  o.run_id = id;  // asked for by name: the same run
  auto ck = MakeCheckpointer(o);
  ASSERT_TRUE(AllRanks(ck != nullptr));
  EXPECT_EQ(ck->run_id(), id);
  EXPECT_TRUE(ck->RegisterReplicated("w", w, {8}).ok());
  // Step 2's manifest claims another run (copied in from elsewhere; whole:
  // its checksum holds).
  const std::string newest = root_ + "/" + ckpt::VersionName(2, 2);
  if (Rank() == 0) {
    std::string text = Slurp(newest + "/manifest.json");
    ASSERT_TRUE(ckpt::UnsealManifest(&text)) << text;
    const size_t at = text.find(id);
    ASSERT_NE(at, std::string::npos);
    text.replace(at, id.size(), "someone-else");
    ckpt::SealManifest(&text);
    std::ofstream(newest + "/manifest.json", std::ios::trunc) << text;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  RestoreResult result;
  s = ck->Restore(RestoreOptions(), &result);
  ASSERT_TRUE(AllRanks(s.ok())) << s;
  EXPECT_EQ(result.step, std::optional<int64_t>(1));
  ASSERT_EQ(result.fallbacks.size(), 1u);
  EXPECT_FALSE(result.fallbacks[0].counted);
  EXPECT_NE(result.fallbacks[0].reason.message().find("was written by run someone-else"), std::string::npos)
      << result.fallbacks[0].reason;
}

}  // namespace
}  // namespace baton::ckpt_testing
