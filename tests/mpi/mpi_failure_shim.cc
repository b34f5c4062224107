#include "tests/mpi/mpi_failure_shim.h"

#include <mpi.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

namespace baton::testing::mpi_failure {
namespace {

using Clock = std::chrono::steady_clock;

std::mutex g_mu;
std::string g_call;  // the armed call; empty: none
int g_left = 0;      // calls of it until the failure
bool g_any_thread = false;
std::thread::id g_thread;
std::atomic<bool> g_injected{false};
Clock::time_point g_injected_at;
std::thread::id g_injected_thread;
std::atomic<int> g_after{0};
constexpr auto kRace = std::chrono::milliseconds(20);

bool Allowed(const char* name) {
  for (const char* ok : {"MPI_Error_string", "MPI_Error_class", "MPI_Initialized", "MPI_Finalized"})
    if (std::strcmp(name, ok) == 0) return true;
  return false;
}

// One line on stderr with a single write: ranks share it.
void Say(const std::string& line) {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const std::string text = "mpi-failure shim (rank " + std::string(rank ? rank : "?") + "): " + line + "\n";
  (void)!write(2, text.data(), text.size());
}

// True when this call is the one to fail; records calls after the failure.
bool Intercept(const char* name) {
  if (g_injected.load()) {
    if (Allowed(name)) return false;
    const auto since = Clock::now() - g_injected_at;
    const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(since).count();
    if (std::this_thread::get_id() != g_injected_thread && since < kRace) {
      Say(std::string(name) + " racing the injected failure (" + std::to_string(ms) + " ms after, another thread)");
      return false;
    }
    g_after.fetch_add(1);
    Say(std::string(name) + " called after the injected failure (" + std::to_string(ms) + " ms after)");
    return false;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_call.empty() || g_call != name) return false;
  if (!g_any_thread && std::this_thread::get_id() != g_thread) return false;
  if (--g_left > 0) return false;
  g_call.clear();
  g_injected_at = Clock::now();
  g_injected_thread = std::this_thread::get_id();
  g_injected.store(true);
  Say(std::string(name) + " fails with MPI_ERR_OTHER (injected)");
  return true;
}

// At exit, after the program's destructors (~Runtime's frees and
// MPI_Finalize included): the count, for the test to read.
struct Summary {
  ~Summary() {
    if (g_injected.load()) Say(std::to_string(g_after.load()) + " MPI calls after the injected failure");
  }
} g_summary;

}  // namespace

void Arm(const char* call, int nth, bool any_thread) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_call = call;
  g_left = nth;
  g_any_thread = any_thread;
  g_thread = std::this_thread::get_id();
}

bool Injected() { return g_injected.load(); }
int CallsAfter() { return g_after.load(); }

}  // namespace baton::testing::mpi_failure

// Every MPI function libbaton.so calls (nm -D --undefined-only .libs/libbaton.so),
// with Open MPI 4.1's signatures.
#define BATON_SHIM(ret, name, params, args)                                        \
  ret name params {                                                                \
    if (::baton::testing::mpi_failure::Intercept(#name)) return MPI_ERR_OTHER;     \
    return P##name args;                                                           \
  }

BATON_SHIM(int, MPI_Allgather, (const void* a0, int a1, MPI_Datatype a2, void* a3, int a4, MPI_Datatype a5, MPI_Comm a6), (a0, a1, a2, a3, a4, a5, a6))
BATON_SHIM(int, MPI_Allgatherv, (const void* a0, int a1, MPI_Datatype a2, void* a3, const int* a4, const int* a5, MPI_Datatype a6, MPI_Comm a7), (a0, a1, a2, a3, a4, a5, a6, a7))
BATON_SHIM(int, MPI_Allreduce, (const void* a0, void* a1, int a2, MPI_Datatype a3, MPI_Op a4, MPI_Comm a5), (a0, a1, a2, a3, a4, a5))
BATON_SHIM(int, MPI_Alltoall, (const void* a0, int a1, MPI_Datatype a2, void* a3, int a4, MPI_Datatype a5, MPI_Comm a6), (a0, a1, a2, a3, a4, a5, a6))
BATON_SHIM(int, MPI_Barrier, (MPI_Comm a0), (a0))
BATON_SHIM(int, MPI_Bcast, (void* a0, int a1, MPI_Datatype a2, int a3, MPI_Comm a4), (a0, a1, a2, a3, a4))
BATON_SHIM(int, MPI_Cancel, (MPI_Request* a0), (a0))
BATON_SHIM(int, MPI_Comm_dup, (MPI_Comm a0, MPI_Comm* a1), (a0, a1))
BATON_SHIM(int, MPI_Comm_free, (MPI_Comm* a0), (a0))
BATON_SHIM(int, MPI_Comm_rank, (MPI_Comm a0, int* a1), (a0, a1))
BATON_SHIM(int, MPI_Comm_set_errhandler, (MPI_Comm a0, MPI_Errhandler a1), (a0, a1))
BATON_SHIM(int, MPI_Comm_size, (MPI_Comm a0, int* a1), (a0, a1))
BATON_SHIM(int, MPI_Comm_split, (MPI_Comm a0, int a1, int a2, MPI_Comm* a3), (a0, a1, a2, a3))
BATON_SHIM(int, MPI_Comm_split_type, (MPI_Comm a0, int a1, int a2, MPI_Info a3, MPI_Comm* a4), (a0, a1, a2, a3, a4))
BATON_SHIM(int, MPI_Error_class, (int a0, int* a1), (a0, a1))
BATON_SHIM(int, MPI_Error_string, (int a0, char* a1, int* a2), (a0, a1, a2))
BATON_SHIM(int, MPI_Exscan, (const void* a0, void* a1, int a2, MPI_Datatype a3, MPI_Op a4, MPI_Comm a5), (a0, a1, a2, a3, a4, a5))
BATON_SHIM(int, MPI_Finalize, (void), ())
BATON_SHIM(int, MPI_Finalized, (int* a0), (a0))
BATON_SHIM(int, MPI_Gather, (const void* a0, int a1, MPI_Datatype a2, void* a3, int a4, MPI_Datatype a5, int a6, MPI_Comm a7), (a0, a1, a2, a3, a4, a5, a6, a7))
BATON_SHIM(int, MPI_Gatherv, (const void* a0, int a1, MPI_Datatype a2, void* a3, const int* a4, const int* a5, MPI_Datatype a6, int a7, MPI_Comm a8), (a0, a1, a2, a3, a4, a5, a6, a7, a8))
BATON_SHIM(int, MPI_Iallgather, (const void* a0, int a1, MPI_Datatype a2, void* a3, int a4, MPI_Datatype a5, MPI_Comm a6, MPI_Request* a7), (a0, a1, a2, a3, a4, a5, a6, a7))
BATON_SHIM(int, MPI_Iallgatherv, (const void* a0, int a1, MPI_Datatype a2, void* a3, const int* a4, const int* a5, MPI_Datatype a6, MPI_Comm a7, MPI_Request* a8), (a0, a1, a2, a3, a4, a5, a6, a7, a8))
BATON_SHIM(int, MPI_Iallreduce, (const void* a0, void* a1, int a2, MPI_Datatype a3, MPI_Op a4, MPI_Comm a5, MPI_Request* a6), (a0, a1, a2, a3, a4, a5, a6))
BATON_SHIM(int, MPI_Ialltoall, (const void* a0, int a1, MPI_Datatype a2, void* a3, int a4, MPI_Datatype a5, MPI_Comm a6, MPI_Request* a7), (a0, a1, a2, a3, a4, a5, a6, a7))
BATON_SHIM(int, MPI_Ibarrier, (MPI_Comm a0, MPI_Request* a1), (a0, a1))
BATON_SHIM(int, MPI_Ibcast, (void* a0, int a1, MPI_Datatype a2, int a3, MPI_Comm a4, MPI_Request* a5), (a0, a1, a2, a3, a4, a5))
BATON_SHIM(int, MPI_Init_thread, (int* a0, char*** a1, int a2, int* a3), (a0, a1, a2, a3))
BATON_SHIM(int, MPI_Initialized, (int* a0), (a0))
BATON_SHIM(int, MPI_Irecv, (void* a0, int a1, MPI_Datatype a2, int a3, int a4, MPI_Comm a5, MPI_Request* a6), (a0, a1, a2, a3, a4, a5, a6))
BATON_SHIM(int, MPI_Ireduce, (const void* a0, void* a1, int a2, MPI_Datatype a3, MPI_Op a4, int a5, MPI_Comm a6, MPI_Request* a7), (a0, a1, a2, a3, a4, a5, a6, a7))
BATON_SHIM(int, MPI_Ireduce_scatter, (const void* a0, void* a1, const int* a2, MPI_Datatype a3, MPI_Op a4, MPI_Comm a5, MPI_Request* a6), (a0, a1, a2, a3, a4, a5, a6))
BATON_SHIM(int, MPI_Ireduce_scatter_block, (const void* a0, void* a1, int a2, MPI_Datatype a3, MPI_Op a4, MPI_Comm a5, MPI_Request* a6), (a0, a1, a2, a3, a4, a5, a6))
BATON_SHIM(int, MPI_Isend, (const void* a0, int a1, MPI_Datatype a2, int a3, int a4, MPI_Comm a5, MPI_Request* a6), (a0, a1, a2, a3, a4, a5, a6))
BATON_SHIM(int, MPI_Query_thread, (int* a0), (a0))
BATON_SHIM(int, MPI_Reduce, (const void* a0, void* a1, int a2, MPI_Datatype a3, MPI_Op a4, int a5, MPI_Comm a6), (a0, a1, a2, a3, a4, a5, a6))
BATON_SHIM(int, MPI_Reduce_scatter, (const void* a0, void* a1, const int* a2, MPI_Datatype a3, MPI_Op a4, MPI_Comm a5), (a0, a1, a2, a3, a4, a5))
BATON_SHIM(int, MPI_Reduce_scatter_block, (const void* a0, void* a1, int a2, MPI_Datatype a3, MPI_Op a4, MPI_Comm a5), (a0, a1, a2, a3, a4, a5))
BATON_SHIM(int, MPI_Request_free, (MPI_Request* a0), (a0))
BATON_SHIM(int, MPI_Test, (MPI_Request* a0, int* a1, MPI_Status* a2), (a0, a1, a2))
BATON_SHIM(int, MPI_Testall, (int a0, MPI_Request* a1, int* a2, MPI_Status* a3), (a0, a1, a2, a3))
BATON_SHIM(int, MPI_Type_commit, (MPI_Datatype* a0), (a0))
BATON_SHIM(int, MPI_Type_contiguous, (int a0, MPI_Datatype a1, MPI_Datatype* a2), (a0, a1, a2))
BATON_SHIM(int, MPI_Type_create_struct, (int a0, const int* a1, const MPI_Aint* a2, const MPI_Datatype* a3, MPI_Datatype* a4), (a0, a1, a2, a3, a4))
BATON_SHIM(int, MPI_Type_free, (MPI_Datatype* a0), (a0))
BATON_SHIM(int, MPI_Wait, (MPI_Request* a0, MPI_Status* a1), (a0, a1))
BATON_SHIM(int, MPI_Waitall, (int a0, MPI_Request* a1, MPI_Status* a2), (a0, a1, a2))
