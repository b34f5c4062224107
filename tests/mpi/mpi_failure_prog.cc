// After an MPI failure baton calls MPI no more (issue 31, item 11): run
// under mpirun by tests/mpi/test_mpi_failure.sh, with the failure injected
// by tests/mpi/mpi_failure_shim.cc on the last rank.
//
//   baton_mpi_failure_prog exit|return CALL [CKPT_DIR]
//
// Every rank makes a runtime (heartbeats on) and an mpi communicator
// (on_timeout kExit for "exit", kReturn for "return"), all-reduces three
// times, then the last rank arms the shim: its next CALL fails with
// MPI_ERR_OTHER. MPI_Test is armed on any thread (the heartbeat's: the
// program waits a second for it), any other call on this thread. Then
// every rank all-reduces once more. The last rank prints what the call
// returned and how long it took ("rank 1: all_reduce: <status> after N
// ms"), then a second all-reduce the same way and should_stop(), waits
// half a second (the heartbeat would call MPI meanwhile) and returns:
// ~Runtime would free and finalize. The other ranks wait for it until
// their deadline (BATON_COLLECTIVE_TIMEOUT). Under "exit" no rank gets
// to print: each exits 75.
//
// With CKPT_DIR every rank also makes a Checkpointer there and starts an
// asynchronous save before the failure; the last rank's background writer
// is held in its shard's fsync (HeldWriterEnv) until the Checkpointer
// abandons it, so it is still writing when MPI fails. After the failing
// all-reduce the last rank prints the writer's state, then what Wait(5)
// and WaitOrAbandon(5) returned and how long each took ("rank 1: wait:
// <status> after N ms"), before the rest as above; the Checkpointer is
// destroyed (the writer abandoned) before the communicator.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "baton/checkpointer.h"
#include "baton/communicator.h"
#include "baton/runtime.h"
#include "ckpt/fs/env.h"
#include "tests/mpi/mpi_failure_shim.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace shim = baton::testing::mpi_failure;

// One all-reduce of one float, timed; the line says what it returned.
void Reduce(baton::Communicator& comm, int rank, const char* label) {
  float x = 1;
  const auto t0 = Clock::now();
  baton::Status s = comm.AllReduce(&x, &x, 1, baton::DType::kF32, baton::ReduceOp::kSum);
  const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  std::printf("rank %d: %s: %s after %lld ms\n", rank, label, s.ToString().c_str(), ms);
  std::fflush(stdout);
}

// Holds the background writer in its shard's fsync until the Checkpointer
// abandons the save (its "abandon" mark) or 30 s passed.
class HeldWriterEnv : public baton::ckpt::fs::EnvWrapper {
 public:
  HeldWriterEnv() : EnvWrapper(baton::ckpt::fs::Env::Default()) {}
  baton::Status SyncFile(const std::string& path) override {
    if (path.find("/shard-") != std::string::npos) {
      held_ = true;
      for (int i = 0; i < 3000 && !released_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return EnvWrapper::SyncFile(path);
  }
  void Mark(const std::string& event) override {
    if (event.rfind("abandon ", 0) == 0) released_ = true;
    EnvWrapper::Mark(event);
  }
  bool held() const { return held_; }

 private:
  std::atomic<bool> held_{false}, released_{false};
};

// A Checkpointer call, timed; the line says what it returned.
template <typename F>
void Timed(int rank, const char* label, F call) {
  const auto t0 = Clock::now();
  baton::Status s = call();
  const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  std::printf("rank %d: %s: %s after %lld ms\n", rank, label, s.ToString().c_str(), ms);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if ((argc != 3 && argc != 4) || (std::strcmp(argv[1], "exit") != 0 && std::strcmp(argv[1], "return") != 0)) {
    std::fprintf(stderr, "usage: %s exit|return MPI_CALL [CKPT_DIR]\n", argv[0]);
    return 2;
  }
  const bool exit_mode = std::strcmp(argv[1], "exit") == 0;
  const std::string call = argv[2];
  const std::string ckpt_dir = argc == 4 ? argv[3] : "";
  baton::RuntimeOptions ro;
  ro.on_timeout = exit_mode ? baton::OnTimeout::kExit : baton::OnTimeout::kReturn;
  std::unique_ptr<baton::Runtime> rt;
  baton::Status s = baton::Runtime::Create(&argc, &argv, ro, &rt);
  if (!s.ok()) {
    std::printf("unexpected: Runtime::Create: %s\n", s.ToString().c_str());
    return 1;
  }
  baton::CommOptions co;
  co.backend = baton::Backend::kMpi;
  co.on_timeout = ro.on_timeout;
  std::unique_ptr<baton::Communicator> comm;
  s = baton::CreateCommunicator(*rt, co, &comm);
  if (!s.ok()) {
    std::printf("unexpected: CreateCommunicator: %s\n", s.ToString().c_str());
    return 1;
  }
  const int rank = rt->rank();
  const bool failing = rank == rt->size() - 1;
  for (int i = 0; i < 3; ++i) {
    float x = 1;
    s = comm->AllReduce(&x, &x, 1, baton::DType::kF32, baton::ReduceOp::kSum);
    if (!s.ok()) {
      std::printf("unexpected: all_reduce %d: %s\n", i, s.ToString().c_str());
      return 1;
    }
  }
  HeldWriterEnv held;
  std::vector<float> weights(1024, 1.0f);
  std::unique_ptr<baton::Checkpointer> ck;
  if (!ckpt_dir.empty()) {
    baton::CheckpointOptions o;
    o.dir = ckpt_dir;
    o.lock_wait_seconds = 0;
    if (failing) o.env = &held;
    s = baton::Checkpointer::Create(*rt, o, &ck);
    if (s.ok()) s = ck->RegisterReplicated("w", weights, {1024});
    if (s.ok()) s = ck->SaveAsync(1);
    if (!s.ok()) {
      std::printf("unexpected: checkpointer: %s\n", s.ToString().c_str());
      return 1;
    }
    for (int i = 0; i < 500 && failing && !held.held(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (failing) {
    const bool any_thread = call == "MPI_Test";
    shim::Arm(call.c_str(), 1, any_thread);
    if (any_thread) std::this_thread::sleep_for(std::chrono::seconds(1));
    std::printf("rank %d: armed %s (injected: %s)\n", rank, call.c_str(), shim::Injected() ? "yes" : "not yet");
    std::fflush(stdout);
  }
  Reduce(*comm, rank, "all_reduce");
  if (failing && ck) {
    const bool writing = ck->async_status().state == baton::AsyncSaveStatus::State::kWriting;
    std::printf("rank %d: writer: %s\n", rank, writing && held.held() ? "writing" : "not writing");
    Timed(rank, "wait", [&] { return ck->Wait(5); });
    Timed(rank, "wait_or_abandon", [&] { return ck->WaitOrAbandon(5); });
    // Each completes the save in flight first (its writer is still held).
    Timed(rank, "save", [&] { return ck->Save(2); });
    Timed(rank, "save_async", [&] { return ck->SaveAsync(3); });
    baton::RestoreResult restored;
    Timed(rank, "restore", [&] { return ck->Restore(baton::RestoreOptions(), &restored); });
  }
  if (failing) {
    Reduce(*comm, rank, "second all_reduce");
    const bool stop = rt->should_stop();
    std::printf("rank %d: should_stop: %s\n", rank, stop ? "true" : "false");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    std::printf("rank %d: returning; MPI calls after the failure so far: %d\n", rank, shim::CallsAfter());
    std::fflush(stdout);
  }
  ck.reset();
  comm.reset();
  rt.reset();
  return 0;
}
