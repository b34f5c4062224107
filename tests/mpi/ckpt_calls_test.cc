// The fixed cost of a small checkpoint save, counted through MPI's
// profiling interface (issue 48): this file defines the MPI collectives a
// save makes (and pthread_create) in the test executable, so that
// libbaton.so's calls resolve to them (an executable's definitions come
// before the shared libraries'); each counts the calls of the thread that
// records and forwards. Pins the collectives of one steady-state Save
// (19 before issue 48, at any group size) and of opening a checkpointer,
// and that SaveAsync and Restore in a loop start no thread per call, and that a
// restore opens no shard through HDF5 (H5Fopen). Run at 3 ranks (ckpt-calls-np3.sh): one shard
// group of three (the default on one node), and groups of one.
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "baton/checkpointer.h"
#include "tests/lib/mpi_world.h"
#include "tests/lib/test_runtime.h"

namespace {

std::atomic<bool> g_recording{false};
std::mutex g_mu;
std::thread::id g_thread;               // guarded by g_mu
std::map<std::string, int> g_calls;     // guarded by g_mu
std::atomic<int> g_threads_started{0};  // by any thread, while recording

void Count(const char* fn) {
  if (!g_recording.load()) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (std::this_thread::get_id() == g_thread) ++g_calls[fn];
}

}  // namespace

extern "C" {

int MPI_Allreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  Count("MPI_Allreduce");
  return PMPI_Allreduce(s, r, n, t, op, c);
}
int MPI_Bcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c) {
  Count("MPI_Bcast");
  return PMPI_Bcast(b, n, t, root, c);
}
int MPI_Gather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root, MPI_Comm c) {
  Count("MPI_Gather");
  return PMPI_Gather(s, sn, st, r, rn, rt, root, c);
}
int MPI_Gatherv(const void* s, int sn, MPI_Datatype st, void* r, const int* rn, const int* d, MPI_Datatype rt,
                int root, MPI_Comm c) {
  Count("MPI_Gatherv");
  return PMPI_Gatherv(s, sn, st, r, rn, d, rt, root, c);
}
int MPI_Allgather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c) {
  Count("MPI_Allgather");
  return PMPI_Allgather(s, sn, st, r, rn, rt, c);
}
int MPI_Allgatherv(const void* s, int sn, MPI_Datatype st, void* r, const int* rn, const int* d, MPI_Datatype rt,
                   MPI_Comm c) {
  Count("MPI_Allgatherv");
  return PMPI_Allgatherv(s, sn, st, r, rn, d, rt, c);
}
int MPI_Exscan(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  Count("MPI_Exscan");
  return PMPI_Exscan(s, r, n, t, op, c);
}
int MPI_Barrier(MPI_Comm c) {
  Count("MPI_Barrier");
  return PMPI_Barrier(c);
}
int MPI_Iallreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* q) {
  Count("MPI_Iallreduce");
  return PMPI_Iallreduce(s, r, n, t, op, c, q);
}
int MPI_Ibcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request* q) {
  Count("MPI_Ibcast");
  return PMPI_Ibcast(b, n, t, root, c, q);
}

// std::thread's, forwarded to libc's.
int pthread_create(pthread_t* t, const pthread_attr_t* a, void* (*f)(void*), void* x) {
  using Fn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "pthread_create"));
  if (g_recording.load()) ++g_threads_started;
  return real(t, a, f, x);
}

// HDF5's file open, counted like the collectives and forwarded to libhdf5's:
// a restore of a format 2 version opens no shard through HDF5.
// hid_t is int64_t since HDF5 1.10 (this test is not built with HDF5's headers).
int64_t H5Fopen(const char* name, unsigned flags, int64_t fapl) {
  using Fn = int64_t (*)(const char*, unsigned, int64_t);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "H5Fopen"));
  Count("H5Fopen");
  return real(name, flags, fapl);
}

}  // extern "C"

namespace baton {
namespace {

using testing::g_runtime;

class Recording {
 public:
  Recording() {
    std::lock_guard<std::mutex> lock(g_mu);
    g_calls.clear();
    g_thread = std::this_thread::get_id();
    g_threads_started = 0;
    g_recording = true;
  }
  ~Recording() { g_recording = false; }
  int total() const {  // MPI collectives
    std::lock_guard<std::mutex> lock(g_mu);
    int n = 0;
    for (const auto& [fn, k] : g_calls) n += fn.rfind("MPI_", 0) == 0 ? k : 0;
    return n;
  }
  std::string summary() const {
    std::lock_guard<std::mutex> lock(g_mu);
    std::string out;
    for (const auto& [fn, k] : g_calls) out += (out.empty() ? "" : ", ") + fn + " x" + std::to_string(k);
    return out.empty() ? "no calls" : out;
  }
};

class CkptCalls : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    std::string path;
    if (testing::WorldRank() == 0) {
      const char* tmp = std::getenv("TMPDIR");
      std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/baton-ckpt-calls-XXXXXX";
      char* made = mkdtemp(templ.data());
      path = made ? made : "";
    }
    int n = static_cast<int>(path.size());
    PMPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
    path.resize(static_cast<size_t>(n));
    PMPI_Bcast(path.data(), n, MPI_CHAR, 0, MPI_COMM_WORLD);
    root_ = path;
    ASSERT_FALSE(root_.empty());
    CheckpointOptions o;
    o.dir = root_ + "/ck";
    o.group_size = GetParam();
    o.keep = 2;
    o.lock_wait_seconds = 0;
    o.transfer = Transfer::kIndependent;
    const int r = testing::WorldRank(), p = testing::WorldSize();
    replicated_.assign(4096, 1.5f);
    sharded_.assign(4096, static_cast<float>(r));
    ASSERT_TRUE(Checkpointer::Create(*g_runtime, o, &ck_).ok());
    ASSERT_TRUE(ck_->RegisterReplicated("w", replicated_, {64, 64}).ok());
    ASSERT_TRUE(ck_->RegisterSharded("emb", sharded_, {64u * p, 64}, 64u * r, 64).ok());
  }
  void TearDown() override {
    ck_.reset();
    PMPI_Barrier(MPI_COMM_WORLD);
    if (testing::WorldRank() == 0) (void)std::system(("rm -rf '" + root_ + "'").c_str());
  }

  std::string root_;
  std::vector<float> replicated_, sharded_;
  std::unique_ptr<Checkpointer> ck_;
};

// One save in the steady state (the second: the first reserves sequence
// numbers): the call's agreement, the chunk records' gather, rank 0's
// version directory and name (one broadcast), the shard (an all-gather of
// the members' rows, the metadata's outcome and offsets in one broadcast),
// the shard agreed, its index (a gather and gatherv in a group of more than
// one), the records with each index's outcome (one gather), the commit
// agreed. 19 before issue 48.
TEST_P(CkptCalls, ASmallSaveMakesTenCollectivesOrEightInGroupsOfOne) {
  ASSERT_TRUE(ck_->Save(1).ok());
  Recording rec;
  Status s = ck_->Save(2);
  const int calls = rec.total();
  ASSERT_TRUE(s.ok()) << s;
  int group = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &group);
  if (GetParam() == 1) group = 1;
  EXPECT_EQ(calls, group > 1 ? 10 : 8) << rec.summary();
}

// SaveAsync in a loop: the writer's thread is started once, not per save;
// so is rank 0's remover (retention's removals that no writer takes: those
// of a commit in Wait, ckpt/version_removal.h), at its first removal.
TEST_P(CkptCalls, SaveAsyncInALoopStartsNoThreadPerSave) {
  for (int step = 1; step <= 4; ++step) {  // keep 2: the third commit on removes a version
    ASSERT_TRUE(ck_->SaveAsync(step).ok());
    ASSERT_TRUE(ck_->Wait().ok());
  }
  Recording rec;
  std::thread([] {}).join();  // the wrapper sees std::thread's starts
  ASSERT_EQ(g_threads_started.exchange(0), 1);
  for (int step = 5; step <= 7; ++step) ASSERT_TRUE(ck_->SaveAsync(step).ok());
  ASSERT_TRUE(ck_->Wait().ok());
  ASSERT_TRUE(ck_->SaveAsync(8).ok());
  ASSERT_TRUE(ck_->Wait().ok());
  EXPECT_EQ(g_threads_started.load(), 0);
}

// Restore in a loop: rank 0's watch over its attempt mark (ckpt/stop_watch.h)
// keeps one thread, started by the first restore.
TEST_P(CkptCalls, RestoreInALoopStartsNoThreadPerRestore) {
  ASSERT_TRUE(ck_->Save(1).ok());
  std::optional<int64_t> step;
  ASSERT_TRUE(ck_->Restore(&step).ok());
  Recording rec;
  for (int i = 0; i < 3; ++i) {
    Status s = ck_->Restore(&step);
    ASSERT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(g_threads_started.load(), 0);
}

// A restore of a format 2 version (a shard's metadata under the manifest's
// checksum) reads its rows with pread at the manifest's offsets: no shard
// is opened through HDF5 (H5Fopen parsed the superblock again only to hand
// back a descriptor: 0.2-0.4 ms a shard, issue 48).
TEST_P(CkptCalls, ARestoreOpensNoShardThroughHdf5) {
  ASSERT_TRUE(ck_->Save(1).ok());
  std::fill(replicated_.begin(), replicated_.end(), 0.0f);
  std::fill(sharded_.begin(), sharded_.end(), -1.0f);
  std::optional<int64_t> step;
  Recording rec;
  Status s = ck_->Restore(&step);
  const std::string calls = rec.summary();
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(step, 1);
  EXPECT_EQ(calls.find("H5Fopen"), std::string::npos) << calls;
  EXPECT_EQ(replicated_, std::vector<float>(4096, 1.5f));
  EXPECT_EQ(sharded_, std::vector<float>(4096, static_cast<float>(testing::WorldRank())));
}

// Opening a checkpointer: rank 0's outcome with the directory, the run id
// and whether it is read-only in one broadcast (an agreement and three
// texts' broadcasts before issue 48: 8 collectives), beside the
// communicators it makes.
TEST_P(CkptCalls, OpeningACheckpointerMakesThreeCollectives) {
  CheckpointOptions o;
  o.dir = root_ + "/ck";
  o.group_size = GetParam();
  o.lock_wait_seconds = 0;
  ck_.reset();  // one Checkpointer per directory
  Recording rec;
  Status s = Checkpointer::Create(*g_runtime, o, &ck_);
  const int calls = rec.total();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(calls, 3) << rec.summary();
}

INSTANTIATE_TEST_SUITE_P(GroupSizes, CkptCalls, ::testing::Values(0, 1));

}  // namespace
}  // namespace baton
