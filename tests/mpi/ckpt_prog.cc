// A program for tests/mpi/test_ckpt_processes.sh: checkpoints across
// processes. A process that dies while a version is being restored (a
// crash inside HDF5, the OOM killer), as many times as it is started, must
// not put the job in a crash loop; a second live writer of a directory is
// refused, and the directory is free again once the first one is dead.
//
//   ckpt_prog DIR save           saves steps 1 and 2
//   ckpt_prog DIR save-more      saves step 3
//   ckpt_prog DIR restore        restores; rank 0 prints "restored step=S fallbacks=F"
//   ckpt_prog DIR restore-crash  restores; the last rank kills itself (SIGKILL)
//                                when it is about to read step 2's shards
//   ckpt_prog DIR hold           saves step 1, rank 0 prints "holding pid P", then
//                                every rank waits until it is killed
//   ckpt_prog DIR save-async     saves steps 1 and 2 with SaveAsync, then Wait
//   ckpt_prog DIR save-async-kill  SaveAsync(1), Wait, SaveAsync(2); the last rank
//                                kills itself (SIGKILL) inside its background
//                                write of step 2 (at the shard's fsync)
// lock_wait_seconds is 0: a held directory fails at once. Exit 0 on
// success, 1 on an error, 3 on wrong content.
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "baton/checkpointer.h"
#include "baton/runtime.h"
#include "ckpt/fs/env.h"

namespace {

// Kills this process at the Checkpointer's "restore-read <version>" mark of
// a version of step 2: what a segfault inside H5Dread would do.
class CrashingEnv : public baton::ckpt::fs::EnvWrapper {
 public:
  CrashingEnv() : EnvWrapper(baton::ckpt::fs::Env::Default()) {}
  void Mark(const std::string& event) override {
    if (event.rfind("restore-read ", 0) == 0 && event.size() > 3 && event.compare(event.size() - 3, 3, "-s2") == 0) {
      std::fprintf(stderr, "ckpt_prog: dying while reading %s\n", event.c_str() + 13);
      kill(getpid(), SIGKILL);
    }
    EnvWrapper::Mark(event);
  }
};

// Kills this process from the background writer, at the fsync of a shard
// of step 2: the rank dies with its shard written but not synced.
class DyingWriterEnv : public baton::ckpt::fs::EnvWrapper {
 public:
  DyingWriterEnv() : EnvWrapper(baton::ckpt::fs::Env::Default()) {}
  baton::Status SyncFile(const std::string& path) override {
    if (path.find("-s2/shard-") != std::string::npos) {
      std::fprintf(stderr, "ckpt_prog: dying in the background write of %s\n", path.c_str());
      kill(getpid(), SIGKILL);
    }
    return EnvWrapper::SyncFile(path);
  }
};

int Fail(const baton::Status& s, int rank) {
  std::fprintf(stderr, "ckpt_prog rank %d: %s\n", rank, s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: ckpt_prog DIR save|save-more|restore|restore-crash|hold|save-async|save-async-kill\n");
    return 2;
  }
  const std::string dir = argv[1], mode = argv[2];
  std::unique_ptr<baton::Runtime> rt;
  if (baton::Status s = baton::Runtime::Create(&argc, &argv, {}, &rt); !s.ok()) return Fail(s, -1);
  const int rank = rt->rank();
  CrashingEnv crashing;
  DyingWriterEnv dying;
  baton::CheckpointOptions co;
  co.dir = dir;
  co.lock_wait_seconds = 0;
  if (mode == "restore-crash" && rank == rt->size() - 1) co.env = &crashing;
  if (mode == "save-async-kill" && rank == rt->size() - 1) co.env = &dying;
  std::unique_ptr<baton::Checkpointer> ck;
  if (baton::Status s = baton::Checkpointer::Create(*rt, co, &ck); !s.ok()) return Fail(s, rank);
  std::vector<int64_t> w(64);
  if (baton::Status s = ck->RegisterReplicated("w", w, {64}); !s.ok()) return Fail(s, rank);
  if (mode == "hold") {
    for (size_t i = 0; i < w.size(); ++i) w[i] = 1000 + static_cast<int64_t>(i);
    if (baton::Status s = ck->Save(1); !s.ok()) return Fail(s, rank);
    if (rank == 0) {
      std::printf("holding pid %d\n", static_cast<int>(getpid()));
      std::fflush(stdout);
    }
    for (;;) pause();
  }
  if (mode == "save" || mode == "save-more") {
    const int64_t first = mode == "save" ? 1 : 3, last = mode == "save" ? 2 : 3;
    for (int64_t step = first; step <= last; ++step) {
      for (size_t i = 0; i < w.size(); ++i) w[i] = step * 1000 + static_cast<int64_t>(i);
      if (baton::Status s = ck->Save(step); !s.ok()) return Fail(s, rank);
    }
    return 0;
  }
  if (mode == "save-async" || mode == "save-async-kill") {
    for (int64_t step = 1; step <= 2; ++step) {
      for (size_t i = 0; i < w.size(); ++i) w[i] = step * 1000 + static_cast<int64_t>(i);
      if (baton::Status s = ck->SaveAsync(step); !s.ok()) return Fail(s, rank);
      // Changed at once: the version keeps what SaveAsync copied.
      for (size_t i = 0; i < w.size(); ++i) w[i] = -1;
      if (step == 1 || mode == "save-async") {
        if (baton::Status s = ck->Wait(); !s.ok()) return Fail(s, rank);
      }
    }
    // save-async-kill: the last rank dies in its write; the others wait
    // for it here until the launcher ends them.
    if (baton::Status s = ck->Wait(); !s.ok()) return Fail(s, rank);
    return 0;
  }
  baton::RestoreResult result;
  if (baton::Status s = ck->Restore(baton::RestoreOptions(), &result); !s.ok()) return Fail(s, rank);
  if (!result.step) return Fail(baton::Status::NotFound("test", "nothing restored"), rank);
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] != *result.step * 1000 + static_cast<int64_t>(i)) return 3;
  }
  if (rank == 0) {
    std::printf("restored step=%lld fallbacks=%zu\n", static_cast<long long>(*result.step), result.fallbacks.size());
  }
  return 0;
}
