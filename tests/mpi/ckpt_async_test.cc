// Asynchronous saves (issue 17): SaveAsync's snapshot semantics, completion
// at the next call, failures reaching every rank, deadlines, abandonment,
// and level 1 (Rollback). A rank killed during a background write and the
// files read by h5dump/h5py: tests/mpi/test_ckpt_processes.sh.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "baton/hdf5_mutex.h"
#include "ckpt/fs/fault_env.h"
#include "tests/mpi/ckpt_fixture.h"

namespace baton::ckpt_testing {
namespace {

using State = AsyncSaveStatus::State;

// Holds the shard write of one version (a path part) at its create until
// released: by the test (Release), or by the Checkpointer abandoning the
// save (its "abandon" mark, made after it set the writer's abandon flag,
// so the writer sees the flag at its first check). A background write that
// lasts exactly as long as a test wants, with no timing to race. The hold
// gives up after a minute (timed_out(): a test fails on it instead of
// hanging).
class SlowEnv : public ckpt::fs::EnvWrapper {
 public:
  explicit SlowEnv(std::string part) : EnvWrapper(ckpt::fs::Env::Default()), part_(std::move(part)) {}
  Status NewWritableFile(const std::string& path, mode_t mode,
                         std::unique_ptr<ckpt::fs::WritableFile>* out) override {
    if (path.find(part_) != std::string::npos && path.find("shard-") != std::string::npos) {
      held_.store(true);
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!release_.load()) {
        if (std::chrono::steady_clock::now() >= until) {
          timed_out_.store(true);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    return EnvWrapper::NewWritableFile(path, mode, out);
  }
  void Mark(const std::string& event) override {
    if (event.rfind("abandon ", 0) == 0 && (event + "/").find(part_) != std::string::npos) {
      abandoned_.store(true);
      Release();
    }
    EnvWrapper::Mark(event);
  }
  void Release() { release_.store(true); }
  bool held() const { return held_.load(); }
  bool abandoned() const { return abandoned_.load(); }
  bool timed_out() const { return timed_out_.load(); }

 private:
  const std::string part_;
  std::atomic<bool> release_{false}, held_{false}, abandoned_{false}, timed_out_{false};
};

using AsyncSave = CkptTest;

// What changes in the arrays after SaveAsync returns never reaches the
// version; the version is a group-of-one version the normal Restore reads.
TEST_F(AsyncSave, ArraysChangedAfterItReturnsAreNotInTheVersion) {
  auto ck = MakeCheckpointer(Options());
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 1);
  EXPECT_TRUE(ck->SetUserBlob("blob-1").ok());
  EXPECT_TRUE(ck->SetRankState("state-1-of-" + std::to_string(Rank())).ok());
  Status s = ck->SaveAsync(1);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(ck->async_status().step, 1);
  // Changed at once, while the writer may still be writing.
  FillAll(&arrays, 2);
  EXPECT_TRUE(ck->SetUserBlob("blob-2").ok());
  EXPECT_TRUE(ck->SetRankState("state-2").ok());
  s = ck->Wait();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(ck->async_status().state, State::kIdle);
  EXPECT_EQ(ck->async_status().step, -1);

  ZeroAll(&arrays);
  std::optional<int64_t> step;
  s = ck->Restore(&step);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(step, 1);
  EXPECT_EQ(CheckAll(arrays, 1), "");
  EXPECT_EQ(ck->user_blob(), "blob-1");
  EXPECT_EQ(ck->rank_state(), "state-1-of-" + std::to_string(Rank()));
  if (Rank() == 0) {
    auto v = Versions(root_);
    ASSERT_EQ(v.size(), 1u);
    ckpt::Manifest m;
    ASSERT_TRUE(ReadManifest(v[0].path, &m).ok());
    // Format 3 like a synchronous save: each rank's shard has its own
    // index (loaded and checked across shards by ReadManifest).
    EXPECT_EQ(m.format, ckpt::kManifestFormat);
    EXPECT_EQ(m.group_size, 1);
    EXPECT_EQ(m.shards.size(), static_cast<size_t>(Size()));
    for (int k = 0; k < Size(); ++k) {
      EXPECT_EQ(m.shards[k].ranks, std::vector<int>{k});
      EXPECT_EQ(m.shards[k].index, ckpt::ShardIndexName(m.shards[k].file));
      EXPECT_TRUE(m.shards[k].loaded);
    }
  }
}

// SaveAsync(k+1) commits k first; the version of k+1 is committed by Wait.
TEST_F(AsyncSave, TheNextSaveCommitsThePreviousOne) {
  auto ck = MakeCheckpointer(Options());
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 1);
  ASSERT_TRUE(ck->SaveAsync(1).ok());
  FillAll(&arrays, 2);
  Status s = ck->SaveAsync(2);
  ASSERT_TRUE(s.ok()) << s;
  if (Rank() == 0) {
    auto v = Versions(root_);
    ASSERT_GE(v.size(), 1u);
    EXPECT_EQ(v[0].step, 1);
    EXPECT_EQ(v[0].status, ckpt::VersionStatus::kComplete);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // A synchronous Save completes the one in flight too.
  FillAll(&arrays, 3);
  s = ck->Save(3);
  ASSERT_TRUE(s.ok()) << s;
  if (Rank() == 0) {
    int complete = 0;
    for (const auto& v : Versions(root_)) complete += v.status == ckpt::VersionStatus::kComplete;
    EXPECT_EQ(complete, 3);
  }
  RestoreOptions ro;
  ro.step = 2;
  RestoreResult rr;
  ZeroAll(&arrays);
  s = ck->Restore(ro, &rr);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(CheckAll(arrays, 2), "");
}

// One rank's failed background write reaches every rank, with its cause,
// at the next call; the version is abandoned; the next save works.
TEST_F(AsyncSave, ABackgroundFailureReachesEveryRankAtTheNextCall) {
  ckpt::fs::FaultEnv fault;
  CheckpointOptions o = Options();
  const int bad = Size() - 1;
  if (Rank() == bad) o.env = &fault;
  auto ck = MakeCheckpointer(o);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 1);
  if (Rank() == bad) fault.Inject(ckpt::fs::FaultEnv::Fault::kFailSync, "shard-");
  ASSERT_TRUE(ck->SaveAsync(1).ok());
  if (Rank() == bad) {
    while (ck->async_status().state == State::kWriting) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(ck->async_status().state, State::kFailed);
    EXPECT_NE(ck->async_status().failure.message().find("shard-"), std::string::npos);
  }
  Status s = ck->SaveAsync(2);  // the next call: reports step 1's failure, does not save
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank " + std::to_string(bad)), std::string::npos) << s;
  EXPECT_NE(s.message().find("asynchronous save of step 1"), std::string::npos) << s;
  EXPECT_NE(s.message().find("shard-" + std::to_string(bad) + ".h5"), std::string::npos) << s;
  EXPECT_EQ(ck->async_status().state, State::kIdle);
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    EXPECT_TRUE(Versions(root_).empty());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  s = ck->SaveAsync(2);
  ASSERT_TRUE(s.ok()) << s;
  s = ck->Wait();
  ASSERT_TRUE(s.ok()) << s;
  std::optional<int64_t> step;
  ASSERT_TRUE(ck->Restore(&step).ok());
  EXPECT_EQ(step, 2);
}

// Wait with a deadline: Timeout on every rank while one rank's write is
// held, the save still in flight; then it commits.
TEST_F(AsyncSave, WaitPastItsDeadlineLeavesTheSaveInFlight) {
  SlowEnv slow("-s1/");
  CheckpointOptions o = Options();
  if (Rank() == 0) o.env = &slow;
  auto ck = MakeCheckpointer(o);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 1);
  ASSERT_TRUE(ck->SaveAsync(1).ok());
  Status s = ck->Wait(0.2);
  EXPECT_EQ(s.code(), Code::kTimeout) << s;
  EXPECT_NE(s.message().find("still in flight"), std::string::npos) << s;
  if (Rank() == 0) {
    EXPECT_EQ(ck->async_status().state, State::kWriting);
  }
  slow.Release();
  s = ck->Wait();
  ASSERT_TRUE(s.ok()) << s;
  if (Rank() == 0) {
    EXPECT_EQ(Versions(root_).size(), 1u);
  }
}

// The stop path: a save not written everywhere in time is abandoned within
// the bound, every rank gets Aborted, the directory is removed, and the
// previous version still restores.
TEST_F(AsyncSave, WaitOrAbandonGivesUpWithinItsBound) {
  SlowEnv slow("-s2/");
  CheckpointOptions o = Options();
  if (Rank() == Size() - 1) o.env = &slow;
  auto ck = MakeCheckpointer(o);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 1);
  ASSERT_TRUE(ck->SaveAsync(1).ok());
  FillAll(&arrays, 2);
  ASSERT_TRUE(ck->SaveAsync(2).ok());
  // The held rank's writer waits in its create until WaitOrAbandon gives
  // up on it (its abandon mark), then sees the abandon at its first check.
  const auto t0 = std::chrono::steady_clock::now();
  Status s = ck->WaitOrAbandon(0.3);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (Rank() == Size() - 1) {
    EXPECT_TRUE(slow.abandoned());
    EXPECT_FALSE(slow.timed_out());
  }
  EXPECT_EQ(s.code(), Code::kAborted) << s;
  EXPECT_NE(s.message().find("step 2"), std::string::npos) << s;
  EXPECT_LT(took, 5.0);
  EXPECT_EQ(ck->async_status().state, State::kIdle);
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    auto v = Versions(root_);
    ASSERT_EQ(v.size(), 1u);
    EXPECT_EQ(v[0].step, 1);
  }
  ZeroAll(&arrays);
  std::optional<int64_t> step;
  ASSERT_TRUE(ck->Restore(&step).ok());
  EXPECT_EQ(step, 1);
  EXPECT_EQ(CheckAll(arrays, 1), "");
}

// A Checkpointer destroyed with a save in flight (no Wait): its writer is
// abandoned, not joined after writing a whole shard that nobody commits;
// the version stays incomplete and the next Checkpointer's save removes it.
TEST_F(AsyncSave, TheDestructorAbandonsTheSaveInFlight) {
  SlowEnv slow("-s2/");
  CheckpointOptions o = Options();
  if (Rank() == 0) o.env = &slow;
  auto ck = MakeCheckpointer(o);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 1);
  ASSERT_TRUE(ck->Save(1).ok());
  FillAll(&arrays, 2);
  ASSERT_TRUE(ck->SaveAsync(2).ok());
  if (Rank() == 0) {
    while (!slow.held()) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the writer is in its create
  }
  ck.reset();  // every rank, no Wait
  if (Rank() == 0) {
    EXPECT_TRUE(slow.abandoned()) << "the destructor joined the writer without abandoning it";
    EXPECT_FALSE(slow.timed_out());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    auto v = Versions(root_);
    ASSERT_EQ(v.size(), 2u);
    EXPECT_EQ(v[0].status, ckpt::VersionStatus::kComplete);
    EXPECT_EQ(v[1].status, ckpt::VersionStatus::kIncomplete);
  }
  ck = MakeCheckpointer(Options());
  ASSERT_TRUE(ck);
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  ZeroAll(&arrays);
  std::optional<int64_t> step;
  ASSERT_TRUE(ck->Restore(&step).ok());
  EXPECT_EQ(step, 1);
  EXPECT_EQ(CheckAll(arrays, 1), "");
  FillAll(&arrays, 3);
  ASSERT_TRUE(ck->Save(3).ok());
  if (Rank() == 0) {
    EXPECT_EQ(Versions(root_).size(), 2u) << "the abandoned version is removed by retention";
  }
}

// Level 1: a NaN loss rolls back to the newest SaveAsync's snapshot, from
// memory (no file is read: the directory is gone), on every rank.
TEST_F(AsyncSave, RollbackAfterANaNRestoresTheSnapshotFromMemory) {
  auto ck = MakeCheckpointer(Options());
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  int64_t step = -1;
  EXPECT_EQ(ck->Rollback(&step).code(), Code::kNotFound);  // nothing staged yet
  FillAll(&arrays, 5);
  EXPECT_TRUE(ck->SetUserBlob("cursor-5").ok());
  EXPECT_TRUE(ck->SetRankState("rng-5-" + std::to_string(Rank())).ok());
  ASSERT_TRUE(ck->SaveAsync(5).ok());
  ASSERT_TRUE(ck->Wait().ok());
  // Training goes on and diverges: NaN in every float array.
  FillAll(&arrays, 6);
  for (TestArray& a : arrays) {
    if (a.dtype == DType::kF32 && a.rows > 0) {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::memcpy(a.buf.data(), &nan, sizeof nan);
    }
  }
  EXPECT_TRUE(ck->SetUserBlob("cursor-6").ok());
  EXPECT_TRUE(ck->SetRankState("rng-6").ok());
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    std::error_code ec;
    stdfs::remove_all(root_, ec);  // no I/O: nothing on disk to read
  }
  MPI_Barrier(MPI_COMM_WORLD);
  Status s = ck->Rollback(&step);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(step, 5);
  EXPECT_EQ(CheckAll(arrays, 5), "");
  EXPECT_EQ(ck->user_blob(), "cursor-5");
  EXPECT_EQ(ck->rank_state(), "rng-5-" + std::to_string(Rank()));
  // Again: the snapshot stays.
  FillAll(&arrays, 7);
  ASSERT_TRUE(ck->Rollback(&step).ok());
  EXPECT_EQ(CheckAll(arrays, 5), "");
}

// Rollback refuses, on every rank, registrations that are not the
// snapshot's and snapshots of different steps.
TEST_F(AsyncSave, RollbackRefusesWhatDoesNotMatchTheSnapshot) {
  auto ck = MakeCheckpointer(Options());
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 1);
  ASSERT_TRUE(ck->SaveAsync(1).ok());
  ASSERT_TRUE(ck->Wait().ok());
  std::vector<float> extra(4);
  ASSERT_TRUE(ck->RegisterReplicated("extra", extra, {4}).ok());
  int64_t step = -1;
  Status s = ck->Rollback(&step);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_EQ(step, -1);
  // A synchronous Save drops the snapshot.
  ASSERT_TRUE(ck->SaveAsync(2).ok());
  ASSERT_TRUE(ck->Save(3).ok());
  EXPECT_EQ(ck->Rollback(&step).code(), Code::kNotFound);
}

// A program's own HDF5 use holds Hdf5Mutex(); a background write waits for
// it (and so never runs inside HDF5 beside it).
TEST_F(AsyncSave, TheBackgroundWriterWaitsForTheHdf5Mutex) {
  auto ck = MakeCheckpointer(Options());
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 1);
  {
    std::lock_guard<std::mutex> lock(Hdf5Mutex());
    ASSERT_TRUE(ck->SaveAsync(1).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(ck->async_status().state, State::kWriting);
  }
  ASSERT_TRUE(ck->Wait().ok());
}

// A save of the arrays and rows saved before is written from the metadata
// image the writer kept of it (ckpt/metadata_image.h, rank_shard_writer.cc):
// no HDF5 call (it completes while this thread holds HDF5's mutex, which
// the writer's first save had to wait for above), and the file is the one
// HDF5 wrote, byte for byte. Its rows restore.
TEST_F(AsyncSave, ASaveOfALayoutSavedBeforeCallsNoHdf5AndWritesTheSameFile) {
  auto ck = MakeCheckpointer(Options());
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 1);
  ASSERT_TRUE(ck->SaveAsync(1).ok());
  const std::string first = ck->last_stats().version_path;
  ASSERT_TRUE(ck->Wait().ok());
  Status waited;
  std::string second;
  {
    std::lock_guard<std::mutex> lock(Hdf5Mutex());
    ASSERT_TRUE(ck->SaveAsync(2).ok());  // step 1's values again
    second = ck->last_stats().version_path;
    waited = ck->Wait(30);
  }
  if (!waited.ok()) (void)ck->Wait();  // released now: let it end before the checks
  EXPECT_TRUE(waited.ok()) << waited << " (the writer waited for HDF5's mutex: it called HDF5)";
  const std::string file = "/shard-" + std::to_string(Rank()) + ".h5";
  const std::string a = Slurp(first + file), b = Slurp(second + file);
  EXPECT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << first + file << " and " << second + file << " differ (" << a.size() << " and "
                      << b.size() << " bytes)";
  FillAll(&arrays, 3);
  ASSERT_TRUE(ck->SaveAsync(3).ok());
  ASSERT_TRUE(ck->Wait().ok());
  ZeroAll(&arrays);
  std::optional<int64_t> step;
  ASSERT_TRUE(ck->Restore(&step).ok());
  EXPECT_EQ(step, 3);
  EXPECT_EQ(CheckAll(arrays, 3), "");
}

}  // namespace
}  // namespace baton::ckpt_testing
