// What the multi-rank checkpoint tests share (tests/mpi/ckpt_*_test.cc):
// a fresh directory per test, arrays of every dtype with known contents,
// and small readers of what a save left on disk.
//
// Every rank runs every test; checks before a collective call use
// EXPECT_*, never ASSERT_*.
#pragma once

#include <fcntl.h>
#include <hdf5.h>
#include <mpi.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "baton/checkpointer.h"
#include "ckpt/catalog.h"
#include "ckpt/manifest.h"
#include "ckpt/manifest_index.h"
#include "tests/lib/mpi_world.h"
#include "tests/lib/test_runtime.h"

namespace baton::ckpt_testing {

namespace stdfs = std::filesystem;

inline int Rank() { return testing::WorldRank(); }
inline int Size() { return testing::WorldSize(); }

inline std::string BcastString(std::string s) {
  int n = static_cast<int>(s.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  s.resize(static_cast<size_t>(n));
  MPI_Bcast(s.data(), n, MPI_CHAR, 0, MPI_COMM_WORLD);
  return s;
}

inline bool AllRanks(bool mine) {
  int v = mine ? 1 : 0, all = 0;
  MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

// A fresh directory per test, made by rank 0, removed after the test.
class CkptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string path;
    if (Rank() == 0) {
      const char* tmp = std::getenv("TMPDIR");
      std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/baton-ckpt-XXXXXX";
      char* made = mkdtemp(templ.data());
      path = made ? std::string(made) + "/ck" : "";
    }
    root_ = BcastString(path);
    ASSERT_FALSE(root_.empty());
  }
  void TearDown() override {
    MPI_Barrier(MPI_COMM_WORLD);
    if (Rank() == 0) {
      std::error_code ec;
      stdfs::remove_all(stdfs::path(root_).parent_path(), ec);
    }
  }

  CheckpointOptions Options(int group_size = 0) const {
    CheckpointOptions o;
    o.dir = root_;
    o.group_size = group_size;
    o.lock_wait_seconds = 0;  // a test holds no lock it does not mean to
    return o;
  }

  std::string root_;
};

// --- arrays with known contents ----------------------------------------------

// Small integers: exact in every dtype, bf16 and u8 included (bool keeps
// whether it is 0, the 8-bit floats round the larger ones: the same way in
// Fill and Expected).
inline double Value(int array, uint64_t element, int64_t step) {
  return static_cast<double>((array * 7 + element * 13 + static_cast<uint64_t>(step) * 5) % 97);
}

struct TestArray {
  std::string name;
  DType dtype;
  std::vector<uint64_t> shape;
  bool replicated;
  uint64_t first_row = 0, rows = 0;  // this rank's (all rows when replicated)
  uint64_t row_elems = 1;
  std::vector<char> buf;

  void Fill(int id, int64_t step) {
    for (uint64_t i = 0; i < rows * row_elems; ++i) {
      StoreValue(dtype, Value(id, first_row * row_elems + i, step), buf.data(), i);
    }
  }
  std::vector<char> Expected(int id, int64_t step) const {
    TestArray copy = *this;
    copy.Fill(id, step);
    return copy.buf;
  }
};

inline void EvenSplit(uint64_t rows, int world, int rank, uint64_t* first, uint64_t* count) {
  const uint64_t base = rows / world, extra = rows % world;
  *first = rank * base + std::min<uint64_t>(rank, extra);
  *count = base + (static_cast<uint64_t>(rank) < extra ? 1 : 0);
}

// Every dtype (bool, i8, ..., f8e5m2 included: issue 32, item 10).
inline constexpr const DType (&kAllTypes)[kNumDTypes] = kAllDTypes;

// Every dtype replicated (5 rows: at 8 ranks some write none) and sharded
// (uneven rows), plus a replicated scalar.
inline std::vector<TestArray> MakeArrays(int world, int rank, uint64_t sharded_rows = 0) {
  std::vector<TestArray> out;
  if (sharded_rows == 0) sharded_rows = 3 * static_cast<uint64_t>(world) + 2;
  for (DType t : kAllTypes) {
    TestArray r{"r_" + std::string(DTypeName(t)), t, {5, 3}, true, 0, 0, 1, {}};
    r.rows = 5;
    r.row_elems = 3;
    out.push_back(r);
    TestArray s{"s_" + std::string(DTypeName(t)), t, {sharded_rows, 4}, false, 0, 0, 1, {}};
    EvenSplit(sharded_rows, world, rank, &s.first_row, &s.rows);
    s.row_elems = 4;
    out.push_back(s);
  }
  TestArray scalar{"scalar", DType::kI64, {}, true, 0, 0, 1, {}};
  scalar.rows = 1;
  out.push_back(scalar);
  for (TestArray& a : out) a.buf.assign(std::max<uint64_t>(1, a.rows * a.row_elems) * DTypeSize(a.dtype), 0);
  return out;
}

inline void FillAll(std::vector<TestArray>* arrays, int64_t step) {
  for (size_t i = 0; i < arrays->size(); ++i) (*arrays)[i].Fill(static_cast<int>(i), step);
}

inline void ZeroAll(std::vector<TestArray>* arrays) {
  for (TestArray& a : *arrays) std::fill(a.buf.begin(), a.buf.end(), 0);
}

inline Status RegisterAll(Checkpointer* ck, std::vector<TestArray>* arrays) {
  for (TestArray& a : *arrays) {
    Status s = a.replicated ? ck->RegisterReplicated(a.name, a.buf.data(), a.dtype, a.shape)
                            : ck->RegisterSharded(a.name, a.buf.data(), a.dtype, a.shape, a.first_row, a.rows);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

// The arrays hold step's values; "" or the first array that does not.
inline std::string CheckAll(const std::vector<TestArray>& arrays, int64_t step) {
  for (size_t i = 0; i < arrays.size(); ++i) {
    if (arrays[i].buf != arrays[i].Expected(static_cast<int>(i), step)) return arrays[i].name;
  }
  return "";
}

// Restores into zeroed `arrays` with `ro`: "" when the restore succeeded,
// took `step` from `level` and left every array holding step's values, else
// what went otherwise (so ASSERT_EQ(..., "") names it). `rr` gets the result.
inline std::string RestoreAndCheck(Checkpointer* ck, std::vector<TestArray>* arrays, int64_t step, int level,
                                   RestoreResult* rr, const RestoreOptions& ro = RestoreOptions()) {
  ZeroAll(arrays);
  *rr = RestoreResult();
  Status s = ck->Restore(ro, rr);
  if (!s.ok()) return "restore failed: " + s.ToString();
  std::string out;
  if (rr->step != step) out += "step " + (rr->step ? std::to_string(*rr->step) : "none") + " (not " + std::to_string(step) + ") ";
  if (rr->level != level) out += "level " + std::to_string(rr->level) + " (not " + std::to_string(level) + ") ";
  const std::string wrong = CheckAll(*arrays, step);
  if (!wrong.empty()) out += "array " + wrong + " does not hold step " + std::to_string(step) + "'s values";
  return out;
}

// Restore(&step) into zeroed `arrays`, on every rank: "" when every rank's
// restore succeeded with `step` and its arrays hold step's values, else what
// went otherwise on this rank.
inline std::string RestoreNewestOnEveryRank(Checkpointer* ck, std::vector<TestArray>* arrays, int64_t step) {
  ZeroAll(arrays);
  std::optional<int64_t> got;
  Status s = ck->Restore(&got);
  if (!AllRanks(s.ok())) return s.ok() ? "another rank's restore failed" : "restore failed: " + s.ToString();
  if (got != step) return "restored step " + (got ? std::to_string(*got) : "none") + ", not " + std::to_string(step);
  const std::string wrong = CheckAll(*arrays, step);
  return wrong.empty() ? "" : "array " + wrong + " does not hold step " + std::to_string(step) + "'s values";
}

// Peak resident memory of this process (VmHWM), in bytes.
// Sets VmHWM to the process's resident memory now (Linux's clear_refs "5"),
// so that the next PeakRss() - PeakRss() counts the peak of what ran in
// between, not what an earlier test of the process left above it (VmHWM
// only grows: a peak under an earlier test's was not seen at all, a peak
// over it only in part).
inline void ResetPeakRss() { std::ofstream("/proc/self/clear_refs") << "5"; }

inline uint64_t PeakRss() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  }
  return 0;
}

inline std::unique_ptr<Checkpointer> MakeCheckpointer(const CheckpointOptions& o) {
  std::unique_ptr<Checkpointer> ck;
  Status s = Checkpointer::Create(*testing::g_runtime, o, &ck);
  EXPECT_TRUE(s.ok()) << s;
  return ck;
}

// Flips one bit of dataset `name`'s second byte in an HDF5 file (the data,
// not HDF5's metadata: what a bad sector does to a checkpoint).
inline void FlipDataByte(const std::string& file, const std::string& name) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0) << file;
  hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  const haddr_t off = d >= 0 ? H5Dget_offset(d) + 1 : HADDR_UNDEF;
  if (d >= 0) H5Dclose(d);
  H5Fclose(f);
  ASSERT_NE(off, HADDR_UNDEF) << file << ": " << name;
  int fd = open(file.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << file;
  unsigned char c = 0;
  ASSERT_EQ(pread(fd, &c, 1, static_cast<off_t>(off)), 1);
  c ^= 0x10;
  ASSERT_EQ(pwrite(fd, &c, 1, static_cast<off_t>(off)), 1);
  close(fd);
}

inline Status ReadManifest(const std::string& vdir, ckpt::Manifest* m) {
  std::ifstream in(vdir + "/manifest.json");
  std::stringstream text;
  text << in.rdbuf();
  BATON_RETURN_IF_ERROR(ckpt::ParseManifestJson(text.str(), m));
  return ckpt::LoadAllShardIndexes(ckpt::fs::Env::Default(), vdir, m);  // format 3: every shard's index
}

// A top-level manifest's text with its shards as format 4's list (a
// format-5 reader takes either form), resealed: for tests that edit one
// shard's fields (format 5 writes canonical shards as a compact table, in
// which names are implied and cannot point elsewhere).
inline std::string WithShardList(const std::string& text) {
  ckpt::Manifest m;
  Status s = ckpt::ParseManifestJson(text, &m);
  EXPECT_TRUE(s.ok()) << s;
  m.format = 4;
  std::string out;
  s = ckpt::WriteTopManifestJson(m, &out);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(ckpt::UnsealManifest(&out));
  const std::string was = "\"format\": 4", now = "\"format\": " + std::to_string(ckpt::kManifestFormat);
  out.replace(out.find(was), was.size(), now);
  ckpt::SealManifest(&out);
  return out;
}

inline std::vector<ckpt::VersionInfo> Versions(const std::string& dir) {
  std::vector<ckpt::VersionInfo> v;
  Status s = ckpt::ListVersions(ckpt::fs::Env::Default(), dir, 2, &v);
  EXPECT_TRUE(s.ok()) << s;
  return v;
}

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Two versions (steps 1 and 2); `damage` runs on rank 0 against version 2's
// directory; then a restore must fall back to step 1.
class CkptDamage : public CkptTest {
 protected:
  void SaveTwo(int group_size = 1) {
    ck_ = MakeCheckpointer(Options(group_size));
    arrays_ = MakeArrays(Size(), Rank());
    ASSERT_TRUE(AllRanks(RegisterAll(ck_.get(), &arrays_).ok()));
    FillAll(&arrays_, 1);
    ASSERT_TRUE(AllRanks(ck_->Save(1).ok()));
    FillAll(&arrays_, 2);
    ASSERT_TRUE(AllRanks(ck_->Save(2).ok()));
    newest_ = ck_->last_stats().version_path;
  }
  // The restore falls back to step 1, reports the newest version in its
  // result as corrupt with a reason naming `what`, and records it.
  void ExpectFallback(const std::string& what) {
    MPI_Barrier(MPI_COMM_WORLD);
    ZeroAll(&arrays_);
    RestoreResult result;
    Status s = ck_->Restore(RestoreOptions(), &result);
    ASSERT_TRUE(AllRanks(s.ok())) << s;
    EXPECT_EQ(result.step, std::optional<int64_t>(1));
    EXPECT_EQ(ck_->last_stats().fallbacks, 1);
    EXPECT_EQ(CheckAll(arrays_, 1), "");
    ASSERT_EQ(result.fallbacks.size(), 1u);
    const SkippedVersion& skipped = result.fallbacks[0];
    EXPECT_EQ(skipped.path, newest_);
    EXPECT_EQ(skipped.step, 2);
    EXPECT_TRUE(skipped.counted);
    EXPECT_EQ(skipped.reason.code(), Code::kCorruption) << skipped.reason;
    EXPECT_NE(skipped.reason.message().find(what), std::string::npos) << skipped.reason;
    if (Rank() == 0) {
      const std::string failures = Slurp(newest_ + "/" + ckpt::kRestoreFailuresName);
      EXPECT_NE(failures.find(what), std::string::npos) << failures;
    }
  }

  std::unique_ptr<Checkpointer> ck_;
  std::vector<TestArray> arrays_;
  std::string newest_;
};

}  // namespace baton::ckpt_testing
