// After an MPI failure baton calls MPI no more (issue 31, item 11): run
// under mpirun by tests/mpi/test_mpi_failure.sh, with the failure injected
// by tests/mpi/mpi_failure_shim.cc on the last rank.
//
//   baton_mpi_failure_prog exit|return CALL
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
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "baton/communicator.h"
#include "baton/runtime.h"
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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "exit") != 0 && std::strcmp(argv[1], "return") != 0)) {
    std::fprintf(stderr, "usage: %s exit|return MPI_CALL\n", argv[0]);
    return 2;
  }
  const bool exit_mode = std::strcmp(argv[1], "exit") == 0;
  const std::string call = argv[2];
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
  if (failing) {
    const bool any_thread = call == "MPI_Test";
    shim::Arm(call.c_str(), 1, any_thread);
    if (any_thread) std::this_thread::sleep_for(std::chrono::seconds(1));
    std::printf("rank %d: armed %s (injected: %s)\n", rank, call.c_str(), shim::Injected() ? "yes" : "not yet");
    std::fflush(stdout);
  }
  Reduce(*comm, rank, "all_reduce");
  if (failing) {
    Reduce(*comm, rank, "second all_reduce");
    const bool stop = rt->should_stop();
    std::printf("rank %d: should_stop: %s\n", rank, stop ? "true" : "false");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    std::printf("rank %d: returning; MPI calls after the failure so far: %d\n", rank, shim::CallsAfter());
    std::fflush(stdout);
  }
  comm.reset();
  rt.reset();
  return 0;
}
