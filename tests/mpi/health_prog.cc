// A small training program for the exit-75 and requeue tests, run under
// mpirun (tests/mpi/test_health_exit.sh) and as a Slurm batch job
// (tests/cluster/test_health.sh). Prints one line per event on stdout.
//
//   baton_health_prog timeout   first run (SLURM_RESTART_COUNT unset or 0):
//                               the last rank skips the all-reduce at step 3
//                               (it waits in a barrier of a second
//                               communicator that nobody else enters), so
//                               every rank hits the deadline
//                               (BATON_COLLECTIVE_TIMEOUT) and, on_timeout
//                               being kExit, the runtime exits 75 on each.
//                               A requeued run all-reduces and exits 0.
//   baton_health_prog requeue   first run: rank 0 calls Requeue() twice;
//                               then every rank steps until should_stop()
//                               (Slurm's SIGTERM when it ends the job for
//                               the requeue) and exits 75. A requeued run
//                               exits 0. At one rank, a refused Requeue()
//                               exits 1 at once.
//   baton_health_prog create-timeout [return]   MPI_Init by the program;
//                               the last rank never comes to Runtime::Create
//                               (it sleeps): the others' Create passes its
//                               deadline: kExit exits 75, "return" (kReturn)
//                               prints the Timeout and returns 75, skipping
//                               MPI_Finalize as collective_abandoned() says.
//   baton_health_prog comm-timeout [return]     the last rank never comes to
//                               CreateCommunicator: likewise.
//   baton_health_prog ckpt-stuck DIR            the last rank stops
//                               (SIGSTOP) after a first Save; the others'
//                               second Save waits for it until it has been
//                               silent in heartbeats for the deadline, then
//                               exits 75.
//   baton_health_prog return-timeout            kReturn everywhere: the last
//                               rank never comes to an all-reduce; the others
//                               get the Timeout and return 75, and ~Runtime
//                               must not wait in MPI_Finalize for the rank
//                               that never came.
//   baton_health_prog stuck     first run: the last rank stops itself for good
//                               (SIGSTOP) at step 3 instead of all-reducing; the
//                               others time out and exit 75 (kExit). A requeued
//                               run all-reduces and exits 0 (issue 14, item 8:
//                               tests/cluster/test_health.sh).
//   baton_health_prog stop-timeout   the last rank never comes to
//                               should_stop() (it sleeps); the others' agreement
//                               passes the deadline and, on_timeout being kExit,
//                               exits 75 naming it.
#include <mpi.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <chrono>
#include <thread>
#include <vector>

#include "baton/checkpointer.h"
#include "baton/communicator.h"
#include "baton/runtime.h"

namespace {

long RestartCount() {
  const char* v = std::getenv("SLURM_RESTART_COUNT");
  return v ? std::strtol(v, nullptr, 10) : 0;
}

int Fail(const char* what, const baton::Status& s) {
  std::printf("unexpected: %s: %s\n", what, s.ToString().c_str());
  std::fflush(stdout);
  return 1;
}

int Timeout(baton::Runtime& rt) {
  baton::CommOptions co;
  co.backend = baton::Backend::kMpi;  // on_timeout kExit, timeout from the environment
  std::unique_ptr<baton::Communicator> comm, other;
  if (baton::Status s = baton::CreateCommunicator(rt, co, &comm); !s.ok()) return Fail("communicator", s);
  if (baton::Status s = baton::CreateCommunicator(rt, co, &other); !s.ok()) return Fail("communicator", s);
  float x = 1;
  rt.BeginStep(3);
  if (RestartCount() > 0) {
    baton::Status s = comm->AllReduce(&x, &x, 1, baton::DType::kF32, baton::ReduceOp::kSum);
    if (!s.ok()) return Fail("all_reduce", s);
    std::printf("rank %d: second run ok, sum %g\n", rt.rank(), x);
    return 0;
  }
  std::printf("rank %d: first run\n", rt.rank());
  std::fflush(stdout);
  baton::Status s = rt.rank() == rt.size() - 1 ? other->Barrier()
                                                : comm->AllReduce(&x, &x, 1, baton::DType::kF32, baton::ReduceOp::kSum);
  return Fail("the collective returned instead of exiting 75", s);
}

int Requeue(baton::Runtime& rt) {
  if (RestartCount() > 0) {
    std::printf("rank %d: second run restart_count=%ld\n", rt.rank(), RestartCount());
    return 0;
  }
  if (rt.rank() == 0) {
    for (const char* which : {"first", "second"}) {
      std::string what;
      baton::Status s = rt.Requeue(&what);
      std::printf("requeue %s call: %s: %s\n", which, s.ToString().c_str(), what.c_str());
      std::fflush(stdout);
      // Slurm refused (the test of that runs one rank): nothing will stop us.
      if (!s.ok() && rt.size() == 1) return 1;
    }
  }
  for (int step = 0; step < 1200; ++step) {  // at most ~60 s
    rt.BeginStep(step);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (rt.should_stop()) {
      std::printf("rank %d: stop agreed at step %d; exiting 75\n", rt.rank(), step);
      std::fflush(stdout);
      return baton::kRequeueExitCode;
    }
  }
  std::printf("rank %d: never asked to stop\n", rt.rank());
  return 1;
}

void Stuck() { std::this_thread::sleep_for(std::chrono::seconds(60)); }

bool IsLast() {
  int r = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return r == n - 1;
}

int CreateTimeout(int argc, char** argv, bool kreturn) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (IsLast()) Stuck();
  baton::RuntimeOptions o;
  o.on_timeout = kreturn ? baton::OnTimeout::kReturn : baton::OnTimeout::kExit;
  std::unique_ptr<baton::Runtime> rt;
  baton::Status s = baton::Runtime::Create(&argc, &argv, o, &rt);
  std::printf("Runtime::Create: %s\n", s.ToString().c_str());
  std::fflush(stdout);
  if (s.ok()) return 1;
  if (!baton::Runtime::collective_abandoned()) MPI_Finalize();
  return baton::kRequeueExitCode;
}

int CommTimeout(baton::Runtime& rt, bool kreturn) {
  if (rt.rank() == rt.size() - 1) Stuck();
  baton::CommOptions co;
  co.backend = baton::Backend::kMpi;
  co.on_timeout = kreturn ? baton::OnTimeout::kReturn : baton::OnTimeout::kExit;
  std::unique_ptr<baton::Communicator> comm;
  baton::Status s = baton::CreateCommunicator(rt, co, &comm);
  std::printf("CreateCommunicator: %s\n", s.ToString().c_str());
  std::fflush(stdout);
  return s.ok() ? 1 : baton::kRequeueExitCode;
}

int ReturnTimeout(baton::Runtime& rt) {
  baton::CommOptions co;
  co.backend = baton::Backend::kMpi;
  co.on_timeout = baton::OnTimeout::kReturn;
  std::unique_ptr<baton::Communicator> comm;
  if (baton::Status s = baton::CreateCommunicator(rt, co, &comm); !s.ok()) return Fail("communicator", s);
  if (rt.rank() == rt.size() - 1) Stuck();
  float x = 1;
  baton::Status s = comm->AllReduce(&x, &x, 1, baton::DType::kF32, baton::ReduceOp::kSum);
  std::printf("rank %d: all_reduce: %s\n", rt.rank(), s.ToString().c_str());
  std::fflush(stdout);
  return s.ok() ? 1 : baton::kRequeueExitCode;  // ~Runtime follows
}

int StuckRank(baton::Runtime& rt) {
  baton::CommOptions co;
  co.backend = baton::Backend::kMpi;
  std::unique_ptr<baton::Communicator> comm;
  if (baton::Status s = baton::CreateCommunicator(rt, co, &comm); !s.ok()) return Fail("communicator", s);
  float x = 1;
  rt.BeginStep(3);
  if (RestartCount() == 0) {
    std::printf("rank %d: first run\n", rt.rank());
    std::fflush(stdout);
    if (rt.rank() == rt.size() - 1) {
      raise(SIGSTOP);  // stuck for good: nothing here continues it
      return Fail("continued", baton::Status::OK());
    }
  }
  baton::Status s = comm->AllReduce(&x, &x, 1, baton::DType::kF32, baton::ReduceOp::kSum);
  if (!s.ok()) return Fail("all_reduce", s);
  std::printf("rank %d: run %ld ok, sum %g\n", rt.rank(), RestartCount(), x);
  return 0;
}

// A rank stopped (SIGSTOP) while the others save: their Save waits in the
// Checkpointer's agreement, which has no per-call deadline (a slow shard
// write is not a failure), until the stopped rank has not answered
// heartbeats for the deadline (CheckpointOptions::peer_timeout, here
// BATON_COLLECTIVE_TIMEOUT): then every other rank exits 75.
int CkptStuck(baton::Runtime& rt, const char* dir) {
  baton::CheckpointOptions o;
  o.dir = dir;
  std::unique_ptr<baton::Checkpointer> ck;
  if (baton::Status s = baton::Checkpointer::Create(rt, o, &ck); !s.ok()) return Fail("checkpointer", s);
  std::vector<float> w(1024, static_cast<float>(rt.rank()));
  if (baton::Status s = ck->RegisterSharded("w", baton::Span<float>(w.data(), w.size()),
                                            {1024 * static_cast<uint64_t>(rt.size())},
                                            1024 * static_cast<uint64_t>(rt.rank()), 1024);
      !s.ok())
    return Fail("register", s);
  if (baton::Status s = ck->Save(1); !s.ok()) return Fail("save 1", s);
  std::printf("rank %d: saved step 1\n", rt.rank());
  std::fflush(stdout);
  rt.BeginStep(2);
  if (rt.rank() == rt.size() - 1) {
    raise(SIGSTOP);  // stuck for good: nothing here continues it
    return Fail("continued", baton::Status::OK());
  }
  baton::Status s = ck->Save(2);
  std::printf("rank %d: unexpected: Save(2) returned: %s\n", rt.rank(), s.ToString().c_str());
  return 1;
}

int StopTimeout(baton::Runtime& rt) {
  if (rt.rank() == rt.size() - 1) {
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 1;
  }
  for (int step = 0; step < 1000; ++step) {
    rt.BeginStep(step);
    if (rt.should_stop()) return 1;
  }
  std::printf("rank %d: the agreement never timed out\n", rt.rank());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const bool kreturn = argc > 2 && std::string(argv[2]) == "return";
  if (mode == "create-timeout") return CreateTimeout(argc, argv, kreturn);
  if ((mode != "timeout" && mode != "requeue" && mode != "stop-timeout" && mode != "comm-timeout" &&
       mode != "return-timeout" && mode != "stuck" && mode != "ckpt-stuck") ||
      (mode == "ckpt-stuck" && argc < 3)) {
    std::fprintf(stderr,
                 "usage: baton_health_prog timeout|requeue|stop-timeout|create-timeout|comm-timeout|return-timeout|stuck\n"
                 "       baton_health_prog ckpt-stuck DIR\n");
    return 2;
  }
  baton::RuntimeOptions ro;
  if (mode == "return-timeout" || kreturn) ro.on_timeout = baton::OnTimeout::kReturn;
  std::unique_ptr<baton::Runtime> rt;
  if (baton::Status s = baton::Runtime::Create(&argc, &argv, ro, &rt); !s.ok()) return Fail("runtime", s);
  const int rc = mode == "timeout"          ? Timeout(*rt)
                 : mode == "requeue"        ? Requeue(*rt)
                 : mode == "comm-timeout"   ? CommTimeout(*rt, kreturn)
                 : mode == "return-timeout" ? ReturnTimeout(*rt)
                 : mode == "stuck"          ? StuckRank(*rt)
                 : mode == "ckpt-stuck"     ? CkptStuck(*rt, argv[2])
                                            : StopTimeout(*rt);
  std::fflush(stdout);
  return rc;
}
