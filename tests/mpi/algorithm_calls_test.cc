// The MPI calls each all-reduce algorithm of the mpi backend makes, counted
// through MPI's profiling interface: this file defines MPI_Allreduce,
// MPI_Reduce, MPI_Bcast, MPI_Isend, ... in the test executable, so that
// libbaton.so's calls resolve to them (an executable's definitions come
// before the shared libraries' in symbol lookup); each records the call and
// forwards to PMPI_*. The mpi backend issues the non-blocking forms
// (MPI_Iallreduce, ...) and polls them against its deadline: each is
// counted as its collective (MPI_Iallreduce as MPI_Allreduce). Only the
// calls of the thread that records are counted, not the heartbeat
// thread's beats. Proves that
//   ring          makes no MPI collective, 2*(P-1)*chunks-per-segment sends
//                 per rank, all to the right neighbour, receives from the left;
//   hierarchical  one MPI_Reduce and one MPI_Bcast on the node communicator,
//                 one MPI_Allreduce among the leaders (none elsewhere), no
//                 point-to-point;
//   native        exactly one MPI_Allreduce.
// Run at 1, 3 and 8 ranks by make check (one node: one leader) and across
// the four nodes of the local cluster (srun -N4 -n8: four leaders, node
// communicators of two); the assertions read the topology and hold in both.
#include <mpi.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "baton/communicator.h"
#include "mpi_runtime/mpi/mpi_communicator.h"
#include "mpi_runtime/mpi/tune_table.h"
#include "tests/lib/test_runtime.h"

namespace {

enum Fn {
  kAllreduce, kReduce, kBcast, kIsend, kIrecv, kSend, kRecv, kSendrecv, kAlltoall, kAllgather,
  kReduceScatterBlock, kNumFns
};
const char* const kFnNames[kNumFns] = {"MPI_Allreduce", "MPI_Reduce",    "MPI_Bcast",    "MPI_Isend",
                                       "MPI_Irecv",     "MPI_Send",      "MPI_Recv",     "MPI_Sendrecv",
                                       "MPI_Alltoall",  "MPI_Allgather", "MPI_Reduce_scatter_block"};

// One intercepted call: the communicator, its size, and the peer (dest or
// source for point-to-point, root for rooted collectives, -1 otherwise),
// in the communicator's numbering.
struct Call {
  Fn fn;
  MPI_Comm comm;
  int comm_size;
  int peer;
  long long bytes;  // count x the datatype's size, where the call has them
};

std::atomic<bool> g_recording{false};
// Dry: the recording thread's calls are recorded and not made (they return
// MPI_SUCCESS, a request MPI_REQUEST_NULL), so that sizes no machine here
// could move can be sent through baton (buffers of address space only).
std::atomic<bool> g_dry{false};
std::mutex g_mu;
std::vector<Call> g_calls;
std::thread::id g_recording_thread;

// Records the call; true when it must not be made (dry).
bool Record(Fn fn, MPI_Comm comm, int peer, int count = 0, MPI_Datatype type = MPI_DATATYPE_NULL) {
  if (!g_recording.load()) return false;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (std::this_thread::get_id() != g_recording_thread) return false;
  }
  int size = -1;
  PMPI_Comm_size(comm, &size);
  MPI_Count type_size = 0;
  if (type != MPI_DATATYPE_NULL) PMPI_Type_size_x(type, &type_size);
  std::lock_guard<std::mutex> lock(g_mu);
  g_calls.push_back(Call{fn, comm, size, peer, static_cast<long long>(count) * type_size});
  return g_dry.load();
}

int Dry(MPI_Request* q) {
  if (q) *q = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}

}  // namespace

// The wrappers: record, then call the real implementation.
extern "C" {

int MPI_Allreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  if (Record(kAllreduce, c, -1, n, t)) return Dry(nullptr);
  return PMPI_Allreduce(s, r, n, t, op, c);
}
int MPI_Reduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c) {
  Record(kReduce, c, root);
  return PMPI_Reduce(s, r, n, t, op, root, c);
}
int MPI_Bcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c) {
  if (Record(kBcast, c, root, n, t)) return Dry(nullptr);
  return PMPI_Bcast(b, n, t, root, c);
}
int MPI_Isend(const void* b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c, MPI_Request* req) {
  Record(kIsend, c, dest);
  return PMPI_Isend(b, n, t, dest, tag, c, req);
}
int MPI_Irecv(void* b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Request* req) {
  Record(kIrecv, c, src);
  return PMPI_Irecv(b, n, t, src, tag, c, req);
}
int MPI_Send(const void* b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c) {
  Record(kSend, c, dest);
  return PMPI_Send(b, n, t, dest, tag, c);
}
int MPI_Recv(void* b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Status* st) {
  Record(kRecv, c, src);
  return PMPI_Recv(b, n, t, src, tag, c, st);
}
int MPI_Sendrecv(const void* sb, int sn, MPI_Datatype st, int dest, int stag, void* rb, int rn, MPI_Datatype rt,
                 int src, int rtag, MPI_Comm c, MPI_Status* status) {
  Record(kSendrecv, c, dest);
  return PMPI_Sendrecv(sb, sn, st, dest, stag, rb, rn, rt, src, rtag, c, status);
}
int MPI_Alltoall(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c) {
  if (Record(kAlltoall, c, -1, sn, st)) return Dry(nullptr);
  return PMPI_Alltoall(s, sn, st, r, rn, rt, c);
}
int MPI_Allgather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c) {
  if (Record(kAllgather, c, -1, sn, st)) return Dry(nullptr);
  return PMPI_Allgather(s, sn, st, r, rn, rt, c);
}
int MPI_Reduce_scatter_block(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  Record(kReduceScatterBlock, c, -1);
  return PMPI_Reduce_scatter_block(s, r, n, t, op, c);
}

// The non-blocking forms, counted as their collectives.
int MPI_Iallreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* q) {
  if (Record(kAllreduce, c, -1, n, t)) return Dry(q);
  return PMPI_Iallreduce(s, r, n, t, op, c, q);
}
int MPI_Ireduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c, MPI_Request* q) {
  Record(kReduce, c, root);
  return PMPI_Ireduce(s, r, n, t, op, root, c, q);
}
int MPI_Ibcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request* q) {
  if (Record(kBcast, c, root, n, t)) return Dry(q);
  return PMPI_Ibcast(b, n, t, root, c, q);
}
int MPI_Ialltoall(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c,
                  MPI_Request* q) {
  if (Record(kAlltoall, c, -1, sn, st)) return Dry(q);
  return PMPI_Ialltoall(s, sn, st, r, rn, rt, c, q);
}
int MPI_Iallgather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c,
                   MPI_Request* q) {
  if (Record(kAllgather, c, -1, sn, st)) return Dry(q);
  return PMPI_Iallgather(s, sn, st, r, rn, rt, c, q);
}
int MPI_Ireduce_scatter_block(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c,
                              MPI_Request* q) {
  Record(kReduceScatterBlock, c, -1);
  return PMPI_Ireduce_scatter_block(s, r, n, t, op, c, q);
}

}  // extern "C"

namespace baton {
namespace {

using testing::g_runtime;

// Records the MPI calls made while it lives.
class Recording {
 public:
  Recording() {
    std::lock_guard<std::mutex> lock(g_mu);
    g_calls.clear();
    g_recording_thread = std::this_thread::get_id();
    g_recording = true;
  }
  ~Recording() { Stop(); }
  void Stop() { g_recording = false; }
  std::vector<Call> calls() const {
    std::lock_guard<std::mutex> lock(g_mu);
    return g_calls;
  }
};

int CountOf(const std::vector<Call>& calls, Fn fn) {
  int n = 0;
  for (const Call& c : calls) n += c.fn == fn ? 1 : 0;
  return n;
}

// "MPI_Isend x3, MPI_Irecv x3": for failure messages.
std::string Summary(const std::vector<Call>& calls) {
  std::string out;
  for (int f = 0; f < kNumFns; ++f) {
    const int n = CountOf(calls, static_cast<Fn>(f));
    if (n > 0) out += std::string(out.empty() ? "" : ", ") + kFnNames[f] + " x" + std::to_string(n);
  }
  return out.empty() ? "no calls" : out;
}

// Whether `c` has the same ranks in the same order as `of` (a duplicate).
bool SameGroup(MPI_Comm c, MPI_Comm of) {
  if (c == MPI_COMM_NULL || of == MPI_COMM_NULL) return false;
  int result = MPI_UNEQUAL;
  PMPI_Comm_compare(c, of, &result);
  return result == MPI_IDENT || result == MPI_CONGRUENT;
}

// Element type the mpi backend reduces in (f16/bf16 in f32).
size_t WorkSize(DType t) { return t == DType::kF16 || t == DType::kBF16 ? 4 : DTypeSize(t); }

std::vector<char> Ones(DType t, size_t n) {
  std::vector<char> b(n * DTypeSize(t) + 1, 0);
  for (size_t i = 0; i < n; ++i) StoreValue(t, 1.0, b.data(), i);
  return b;
}

constexpr size_t kChunkBytes = 64;

std::unique_ptr<Communicator> Make(Algorithm a) {
  CommOptions o;
  o.backend = Backend::kMpi;
  o.algorithm = a;
  o.ring_chunk_bytes = kChunkBytes;
  std::unique_ptr<Communicator> comm;
  Status s = CreateCommunicator(*g_runtime, o, &comm);
  EXPECT_TRUE(s.ok()) << s;
  return comm;
}

TEST(AlgorithmCalls, WrappersAreInterposed) {
  // A call of the test's own goes through the wrapper too: if libmpi's
  // definitions won, every count below would be zero.
  Recording rec;
  int one = 1, sum = 0;
  ASSERT_EQ(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, g_runtime->world_comm()), MPI_SUCCESS);
  rec.Stop();
  EXPECT_EQ(sum, g_runtime->size());
  EXPECT_EQ(CountOf(rec.calls(), kAllreduce), 1);
}

// Shapes of the all-reduce, per rank count P and chunk of C elements:
//   exact   P*C*3 elements: every segment is exactly 3 chunks;
//   uneven  1001 elements: segments and chunks of unequal length;
//   one     1 element: one segment of one element, the others empty.
enum class Shape { kExact, kUneven, kOne };
const char* ShapeName(Shape s) { return s == Shape::kExact ? "exact" : s == Shape::kUneven ? "uneven" : "one"; }
constexpr size_t kExactChunksPerSegment = 3;

using Param = std::tuple<DType, Shape>;

class AllReduceCalls : public ::testing::TestWithParam<Param> {
 protected:
  DType t() const { return std::get<0>(GetParam()); }
  size_t chunk() const { return std::max<size_t>(1, kChunkBytes / WorkSize(t())); }
  size_t count() const {
    switch (std::get<1>(GetParam())) {
      case Shape::kExact: return static_cast<size_t>(P()) * chunk() * kExactChunksPerSegment;
      case Shape::kUneven: return 1001;
      case Shape::kOne: return 1;
    }
    return 0;
  }
  int P() const { return g_runtime->size(); }
  int R() const { return g_runtime->rank(); }

  // Runs one all-reduce of count() elements, returns the calls it made.
  std::vector<Call> Run(Communicator* comm) {
    auto buf = Ones(t(), count());
    Recording rec;
    Status s = comm->AllReduce(buf.data(), buf.data(), count(), t(), ReduceOp::kSum);
    rec.Stop();
    EXPECT_TRUE(s.ok()) << s;
    // Every input is 1, so every result is P (exact in every dtype here).
    for (size_t i = 0; i < count(); ++i) {
      switch (t()) {
        case DType::kF32: EXPECT_EQ(reinterpret_cast<float*>(buf.data())[i], P()) << i; break;
        case DType::kF64: EXPECT_EQ(reinterpret_cast<double*>(buf.data())[i], P()) << i; break;
        case DType::kBF16: EXPECT_EQ(BFloat16ToFloat(reinterpret_cast<uint16_t*>(buf.data())[i]), P()) << i; break;
        default: break;
      }
    }
    return rec.calls();
  }
};

TEST_P(AllReduceCalls, RingIsPointToPointToTheNeighbours) {
  auto comm = Make(Algorithm::kRing);
  ASSERT_TRUE(comm);
  const std::vector<Call> calls = Run(comm.get());
  const int P = this->P(), right = (R() + 1) % P, left = (R() + P - 1) % P;
  const size_t n = count(), C = chunk();

  // What the ring sends: in step s of the reduce-scatter, segment (r-s-1);
  // in step s of the all-gather, segment (r-s); each in ceil(len/C) chunks.
  auto seg_len = [&](int i) {
    i = ((i % P) + P) % P;
    return n / static_cast<size_t>(P) + (static_cast<size_t>(i) < n % static_cast<size_t>(P) ? 1 : 0);
  };
  auto chunks = [&](size_t len) { return (len + C - 1) / C; };
  size_t want_sends = 0, want_recvs = 0;
  for (int s = 0; s < P - 1; ++s) {
    want_sends += chunks(seg_len(R() - s - 1)) + chunks(seg_len(R() - s));
    want_recvs += chunks(seg_len(R() - s - 2)) + chunks(seg_len(R() - s - 1));
  }
  if (std::get<1>(GetParam()) == Shape::kExact) {
    EXPECT_EQ(want_sends, 2 * static_cast<size_t>(P - 1) * kExactChunksPerSegment) << "the test's own arithmetic";
  }

  EXPECT_EQ(CountOf(calls, kAllreduce), 0) << Summary(calls);
  EXPECT_EQ(CountOf(calls, kReduce), 0) << Summary(calls);
  EXPECT_EQ(CountOf(calls, kBcast), 0) << Summary(calls);
  EXPECT_EQ(CountOf(calls, kReduceScatterBlock) + CountOf(calls, kAllgather) + CountOf(calls, kAlltoall), 0)
      << Summary(calls);
  EXPECT_EQ(CountOf(calls, kSend) + CountOf(calls, kRecv) + CountOf(calls, kSendrecv), 0) << Summary(calls);
  EXPECT_EQ(static_cast<size_t>(CountOf(calls, kIsend)), want_sends)
      << Summary(calls) << "; P=" << P << ", " << n << " elements, chunks of " << C;
  EXPECT_EQ(static_cast<size_t>(CountOf(calls, kIrecv)), want_recvs) << Summary(calls);
  int wrong_peer = 0, wrong_comm = 0;
  for (const Call& c : calls) {
    if (c.fn == kIsend && c.peer != right) ++wrong_peer;
    if (c.fn == kIrecv && c.peer != left) ++wrong_peer;
    if (!SameGroup(c.comm, g_runtime->world_comm())) ++wrong_comm;
  }
  EXPECT_EQ(wrong_peer, 0) << "sends go to rank " << right << " only, receives come from rank " << left << " only";
  EXPECT_EQ(wrong_comm, 0) << "the ring runs over (a duplicate of) the world";
}

TEST_P(AllReduceCalls, HierarchicalIsReduceLeadersAllreduceBcast) {
  auto comm = Make(Algorithm::kHierarchical);
  ASSERT_TRUE(comm);
  const std::vector<Call> calls = Run(comm.get());
  const Runtime& rt = *g_runtime;
  const bool leader = rt.local_rank() == 0;

  EXPECT_EQ(CountOf(calls, kReduce), 1) << Summary(calls);
  EXPECT_EQ(CountOf(calls, kBcast), 1) << Summary(calls);
  EXPECT_EQ(CountOf(calls, kAllreduce), leader ? 1 : 0) << Summary(calls) << (leader ? " (a leader)" : " (not a leader)");
  for (Fn f : {kIsend, kIrecv, kSend, kRecv, kSendrecv, kAlltoall, kAllgather, kReduceScatterBlock})
    EXPECT_EQ(CountOf(calls, f), 0) << kFnNames[f] << ": " << Summary(calls);
  for (const Call& c : calls) {
    if (c.fn == kReduce || c.fn == kBcast) {
      EXPECT_TRUE(SameGroup(c.comm, rt.node_comm())) << kFnNames[c.fn] << " on the node communicator";
      EXPECT_EQ(c.comm_size, rt.local_size()) << kFnNames[c.fn] << ": the node's ranks";
      EXPECT_EQ(c.peer, 0) << kFnNames[c.fn] << ": root is local rank 0";
    }
    if (c.fn == kAllreduce) {
      EXPECT_TRUE(SameGroup(c.comm, rt.leaders_comm())) << "MPI_Allreduce among the leaders";
      EXPECT_EQ(c.comm_size, rt.num_nodes()) << "one leader per node";
    }
  }
}

TEST_P(AllReduceCalls, NativeIsOneAllreduce) {
  auto comm = Make(Algorithm::kNative);
  ASSERT_TRUE(comm);
  const std::vector<Call> calls = Run(comm.get());
  EXPECT_EQ(CountOf(calls, kAllreduce), 1) << Summary(calls);
  EXPECT_EQ(calls.size(), 1u) << Summary(calls);
  for (const Call& c : calls) {
    EXPECT_TRUE(SameGroup(c.comm, g_runtime->world_comm())) << "over (a duplicate of) the world";
    EXPECT_EQ(c.comm_size, P());
  }
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(DTypeName(std::get<0>(info.param))) + "_" + ShapeName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Mpi, AllReduceCalls,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kF64, DType::kBF16),
                                            ::testing::Values(Shape::kExact, Shape::kUneven, Shape::kOne)),
                         Name);

// Algorithm auto without a tuning table measures online (online_tuner.h):
// with 2 samples per candidate, calls 0..2n-1 of one size class each run
// the caller's all-reduce with native (so that the program's results do
// not depend on the measurement) and then ONE sample, candidate k mod n
// (native; hierarchical with several nodes holding several ranks; ring
// with 2 ranks or more), on a copy of the input; the last of them adds ONE
// MPI_Allreduce (the agreement on the slowest rank's medians), and every
// later call runs the one algorithm agreed, the same on every rank. One
// rank: nothing to choose, native from the first call.
std::vector<Algorithm> AutoCandidates() {
  const int P = g_runtime->size(), nodes = g_runtime->num_nodes();
  std::vector<Algorithm> candidates{Algorithm::kNative};
  if (nodes > 1 && nodes < P) candidates.push_back(Algorithm::kHierarchical);
  if (P > 1) candidates.push_back(Algorithm::kRing);
  return candidates;
}

std::unique_ptr<Communicator> MakeAuto(const char* decisions_file = nullptr) {
  setenv("BATON_AUTO_SAMPLES", "2", 1);
  setenv("BATON_TUNE_FILE", "/nonexistent/baton-tune.json", 1);
  if (decisions_file) setenv("BATON_AUTO_FILE", decisions_file, 1);
  auto comm = Make(Algorithm::kAuto);
  unsetenv("BATON_AUTO_SAMPLES");
  unsetenv("BATON_TUNE_FILE");
  unsetenv("BATON_AUTO_FILE");
  return comm;
}

// Whether `calls` are those of one all-reduce by `a` (plus `extra_allreduce`
// MPI_Allreduce calls of native runs and agreements).
void ExpectRunsAs(const std::vector<Call>& calls, Algorithm a, int extra_allreduce) {
  switch (a) {
    case Algorithm::kNative:
      EXPECT_EQ(CountOf(calls, kAllreduce), 1 + extra_allreduce) << Summary(calls);
      EXPECT_EQ(CountOf(calls, kIsend) + CountOf(calls, kReduce), 0) << Summary(calls);
      break;
    case Algorithm::kRing:
      if (g_runtime->size() > 1) {
        EXPECT_GT(CountOf(calls, kIsend), 0) << Summary(calls);
      }
      EXPECT_EQ(CountOf(calls, kAllreduce), extra_allreduce) << Summary(calls);
      break;
    default:  // hierarchical
      EXPECT_EQ(CountOf(calls, kReduce), 1) << Summary(calls);
      EXPECT_EQ(CountOf(calls, kIsend), 0) << Summary(calls);
  }
}

TEST(AlgorithmCalls, AutoWithoutATableMeasuresEachCandidateThenAgreesOnce) {
  auto comm = MakeAuto();
  ASSERT_TRUE(comm);
  const Runtime& rt = *g_runtime;
  const int P = rt.size();
  const std::vector<Algorithm> candidates = AutoCandidates();
  const size_t n = candidates.size(), count = 300;  // 1200 bytes of f32
  const size_t exploring = n > 1 ? 2 * n : 0;
  for (size_t k = 0; k < exploring + 3; ++k) {
    auto buf = Ones(DType::kF32, count);
    Recording rec;
    Status s = comm->AllReduce(buf.data(), buf.data(), count, DType::kF32, ReduceOp::kSum);
    rec.Stop();
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(reinterpret_cast<float*>(buf.data())[count - 1], P) << "call " << k;
    if (k < exploring) {
      SCOPED_TRACE("exploring call " + std::to_string(k));
      // The caller's native all-reduce, then the sample (and the agreement).
      ExpectRunsAs(rec.calls(), candidates[k % n], 1 + (k == exploring - 1 ? 1 : 0));
    } else {
      Algorithm chosen = Algorithm::kAuto;
      ASSERT_TRUE(baton::mpi::AutoAlgorithmOf(*comm, count * 4, &chosen));
      SCOPED_TRACE("decided call " + std::to_string(k) + ": " + std::string(AlgorithmName(chosen)));
      ExpectRunsAs(rec.calls(), chosen, 0);
      // Every rank made the same choice.
      int mine = static_cast<int>(chosen), lo = 0, hi = 0;
      PMPI_Allreduce(&mine, &lo, 1, MPI_INT, MPI_MIN, rt.world_comm());
      PMPI_Allreduce(&mine, &hi, 1, MPI_INT, MPI_MAX, rt.world_comm());
      EXPECT_EQ(lo, hi) << "ranks chose different algorithms";
    }
  }
  // Another size class starts its own measurement.
  Algorithm other = Algorithm::kAuto;
  ASSERT_TRUE(baton::mpi::AutoAlgorithmOf(*comm, 1 << 20, &other));
  EXPECT_EQ(other, Algorithm::kNative) << "an unmeasured class runs native (and non-blocking calls use that)";
}

// f32 inputs whose sum depends on the order of the additions: 1e8 on rank
// 0, -1e8 on the last rank and 1 elsewhere in the odd elements (1e8 + 1 is
// 1e8 in f32), small integers in the even ones. Algorithms that add in
// different orders give different bits; at two ranks every order is the
// same (a + b == b + a).
std::vector<float> OrderSensitive(size_t n) {
  const int P = g_runtime->size(), r = g_runtime->rank();
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = i % 2 ? (r == 0 ? 1e8f : r == P - 1 ? -1e8f : 1.0f) : static_cast<float>((r * 7 + i * 3) % 5);
  return v;
}

// What the program computes does not depend on auto's measurement: while
// a size class is measured every call gives native's bits, later calls
// the bits of the algorithm decided (issue 14, item 10: the samples were
// real calls, so results depended on which candidate a step sampled).
TEST(AlgorithmCalls, AutoMeasurementLeavesResultsAsNative) {
  auto automatic = MakeAuto();
  ASSERT_TRUE(automatic);
  std::unique_ptr<Communicator> by[3];  // indexed by Algorithm: native, hierarchical, ring
  for (Algorithm a : {Algorithm::kNative, Algorithm::kHierarchical, Algorithm::kRing}) {
    by[static_cast<int>(a)] = Make(a);
    ASSERT_TRUE(by[static_cast<int>(a)]);
  }
  const size_t n = AutoCandidates().size(), count = 30;
  const size_t exploring = n > 1 ? 2 * n : 0;
  for (size_t k = 0; k < exploring + 2; ++k) {
    std::vector<float> in = OrderSensitive(count), got(count), want(count);
    Algorithm now = Algorithm::kAuto;  // what auto gives this call's result by
    ASSERT_TRUE(baton::mpi::AutoAlgorithmOf(*automatic, count * 4, &now));
    ASSERT_TRUE(automatic->AllReduce(in.data(), got.data(), count, DType::kF32, ReduceOp::kSum).ok());
    ASSERT_TRUE(by[static_cast<int>(now)]->AllReduce(in.data(), want.data(), count, DType::kF32, ReduceOp::kSum).ok());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), count * 4), 0)
        << "call " << k << " differs from " << AlgorithmName(now) << "'s result";
    if (k < exploring) {
      EXPECT_EQ(now, Algorithm::kNative) << "call " << k << " is measured: native's result";
    }
  }
}

// The default algorithm (CommOptions::algorithm unset, no BATON_ALGORITHM)
// is native from the first call: one MPI_Allreduce per all-reduce, never a
// measurement, so that a program's results are the same run after run.
TEST(AlgorithmCalls, DefaultIsNativeFromTheFirstCall) {
  unsetenv("BATON_ALGORITHM");
  setenv("BATON_TUNE_FILE", "/nonexistent/baton-tune.json", 1);
  CommOptions o;
  o.backend = Backend::kMpi;
  std::unique_ptr<Communicator> comm;
  Status s = CreateCommunicator(*g_runtime, o, &comm);
  unsetenv("BATON_TUNE_FILE");
  ASSERT_TRUE(s.ok()) << s;
  for (int k = 0; k < 12; ++k) {
    std::vector<float> buf(300, 1.0f);
    Recording rec;
    ASSERT_TRUE(comm->AllReduce(buf.data(), buf.data(), buf.size(), DType::kF32, ReduceOp::kSum).ok());
    rec.Stop();
    EXPECT_EQ(CountOf(rec.calls(), kAllreduce), 1) << "call " << k << ": " << Summary(rec.calls());
    EXPECT_EQ(rec.calls().size(), 1u) << "call " << k << ": " << Summary(rec.calls());
  }
}

// BATON_ALGORITHM chooses where the program did not; an explicit
// CommOptions::algorithm wins; a bad value is refused by name.
TEST(AlgorithmCalls, BatonAlgorithmChoosesUnlessTheProgramDid) {
  auto create = [](std::optional<Algorithm> a, std::unique_ptr<Communicator>* comm) {
    CommOptions o;
    o.backend = Backend::kMpi;
    o.algorithm = a;
    o.ring_chunk_bytes = kChunkBytes;
    return CreateCommunicator(*g_runtime, o, comm);
  };
  auto calls_of = [](Communicator* comm) {
    std::vector<float> buf(300, 1.0f);
    Recording rec;
    EXPECT_TRUE(comm->AllReduce(buf.data(), buf.data(), buf.size(), DType::kF32, ReduceOp::kSum).ok());
    rec.Stop();
    return rec.calls();
  };
  setenv("BATON_ALGORITHM", "ring", 1);
  std::unique_ptr<Communicator> from_env, explicit_native, bad;
  Status a = create(std::nullopt, &from_env);
  Status b = create(Algorithm::kNative, &explicit_native);
  setenv("BATON_ALGORITHM", "fastest", 1);
  Status c = create(std::nullopt, &bad);
  unsetenv("BATON_ALGORITHM");
  ASSERT_TRUE(a.ok()) << a;
  ASSERT_TRUE(b.ok()) << b;
  ExpectRunsAs(calls_of(from_env.get()), Algorithm::kRing, 0);
  ExpectRunsAs(calls_of(explicit_native.get()), Algorithm::kNative, 0);
  EXPECT_EQ(c.code(), Code::kInvalidArgument) << c;
  EXPECT_NE(c.message().find("BATON_ALGORITHM='fastest' is not one of native, hierarchical, ring, auto"),
            std::string::npos)
      << c;
}

// One path for every rank (only rank 0 reads or writes it).
std::string TempPath(const char* name) {
  int pid = static_cast<int>(getpid());
  PMPI_Bcast(&pid, 1, MPI_INT, 0, g_runtime->world_comm());
  return "/tmp/baton-calls-test-" + std::to_string(pid) + "-" + name;
}

// With BATON_AUTO_FILE, a size class decided online is written there (by
// rank 0, for this job shape), and a later communicator (a requeued run of
// the same shape) takes the decision from it instead of measuring again,
// so that it runs what the first run ran.
TEST(AlgorithmCalls, AutoKeepsItsDecisionsInBatonAutoFile) {
  const std::string path = TempPath("auto-decisions.json");
  if (g_runtime->rank() == 0) std::remove(path.c_str());
  PMPI_Barrier(g_runtime->world_comm());
  const size_t n = AutoCandidates().size(), count = 300;  // 1200 bytes: class 1024
  {
    auto comm = MakeAuto(path.c_str());
    ASSERT_TRUE(comm);
    for (size_t k = 0; k < 2 * n; ++k) {
      std::vector<float> buf(count, 1.0f);
      ASSERT_TRUE(comm->AllReduce(buf.data(), buf.data(), count, DType::kF32, ReduceOp::kSum).ok());
    }
    Algorithm decided = Algorithm::kAuto;
    ASSERT_TRUE(baton::mpi::AutoAlgorithmOf(*comm, count * 4, &decided));
    PMPI_Barrier(g_runtime->world_comm());
    // Rank 0's checks in a function of their own: a failed ASSERT returns
    // from it, not from the test, so rank 0 still reaches the barriers.
    auto check_file = [&] {
      std::string text;
      bool exists = false;
      ASSERT_TRUE(baton::mpi::ReadTuneFile(path, &text, &exists).ok());
      if (n == 1) {
        EXPECT_FALSE(exists) << "one rank measures nothing, so it records nothing: " << text;
        return;
      }
      ASSERT_TRUE(exists) << path;
      baton::mpi::TuneTable table;
      ASSERT_TRUE(baton::mpi::ParseTuneTable(text, path, &table).ok()) << text;
      const auto entry = table.find(baton::mpi::KeyOf(g_runtime->topology()));
      ASSERT_NE(entry, table.end()) << text;
      ASSERT_EQ(entry->second.count(1024), 1u) << text;
      EXPECT_EQ(std::string(baton::mpi::TunedAlgoName(entry->second.at(1024))), AlgorithmName(decided)) << text;
    };
    if (g_runtime->rank() == 0) check_file();
  }
  // A file that says ring for this class: the first call runs ring, with
  // no measurement and no agreement.
  if (g_runtime->rank() == 0) {
    baton::mpi::TuneTable table;
    table[baton::mpi::KeyOf(g_runtime->topology())][1024] = baton::mpi::TunedAlgo::kRing;
    EXPECT_TRUE(baton::mpi::WriteTuneFile(path, baton::mpi::FormatTuneTable(table)).ok());
  }
  PMPI_Barrier(g_runtime->world_comm());
  auto comm = MakeAuto(path.c_str());
  ASSERT_TRUE(comm);
  std::vector<float> buf(count, 1.0f);
  Recording rec;
  ASSERT_TRUE(comm->AllReduce(buf.data(), buf.data(), count, DType::kF32, ReduceOp::kSum).ok());
  rec.Stop();
  // One rank: auto has nothing to choose from and runs native.
  ExpectRunsAs(rec.calls(), n == 1 ? Algorithm::kNative : Algorithm::kRing, 0);
  PMPI_Barrier(g_runtime->world_comm());
  if (g_runtime->rank() == 0) std::remove(path.c_str());
}

// Issue 14, item 6: no 2 GiB limits. A block of 2.5 GiB is one message of
// a derived datatype of exactly that size (broadcast, all-gather,
// all-to-all; MPI 3's counts are int, and these were refused), and an
// all-reduce of 2^31 + 5 f32 is cut into int-sized calls. Dry: the calls
// are recorded, not made, and the buffers are address space that nothing
// may touch (PROT_NONE), so this runs on any machine, blocking and not.
TEST(AlgorithmCalls, BlocksPastTwoGiBMoveAsOneMessageEach) {
  const int P = g_runtime->size();
  const size_t block = size_t{5} << 29;  // 2.5 GiB
  const size_t span = block * static_cast<size_t>(P);
  void* mem = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(mem, MAP_FAILED) << "no " << span << " bytes of address space";
  char* big = static_cast<char*>(mem);
  for (OnTimeout policy : {OnTimeout::kExit, OnTimeout::kReturn}) {
    CommOptions o;
    o.backend = Backend::kMpi;
    o.algorithm = Algorithm::kNative;
    o.on_timeout = policy;
    std::unique_ptr<Communicator> comm;
    ASSERT_TRUE(CreateCommunicator(*g_runtime, o, &comm).ok());
    SCOPED_TRACE(policy == OnTimeout::kExit ? "blocking MPI (kExit)" : "non-blocking MPI (kReturn)");
    Recording rec;
    g_dry = true;
    Status b = comm->Broadcast(big, block, DType::kU8, 0);
    Status g = comm->AllGather(big, big, block / 4, DType::kF32);
    Status a = comm->AllToAll(big, big, block / 8, DType::kF64);
    Status r = comm->AllReduce(big, big, (size_t{1} << 31) + 5, DType::kF32, ReduceOp::kMax);
    g_dry = false;
    rec.Stop();
    EXPECT_TRUE(b.ok()) << b;
    EXPECT_TRUE(g.ok()) << g;
    EXPECT_TRUE(a.ok()) << a;
    EXPECT_TRUE(r.ok()) << r;
    const std::vector<Call> calls = rec.calls();
    ASSERT_EQ(calls.size(), 6u) << Summary(calls);
    EXPECT_EQ(calls[0].fn, kBcast);
    EXPECT_EQ(calls[1].fn, kAllgather);
    EXPECT_EQ(calls[2].fn, kAlltoall);
    for (int k = 0; k < 3; ++k)
      EXPECT_EQ(calls[static_cast<size_t>(k)].bytes, static_cast<long long>(block)) << kFnNames[calls[static_cast<size_t>(k)].fn];
    // 2^30, 2^30 and 5 elements of f32.
    for (int k = 3; k < 6; ++k) EXPECT_EQ(calls[static_cast<size_t>(k)].fn, kAllreduce);
    EXPECT_EQ(calls[3].bytes, 4LL << 30);
    EXPECT_EQ(calls[4].bytes, 4LL << 30);
    EXPECT_EQ(calls[5].bytes, 20);
  }
  munmap(mem, span);
}

// An empty all-reduce makes no MPI call with any algorithm.
TEST(AlgorithmCalls, EmptyAllReduceCallsNothing) {
  for (Algorithm a : {Algorithm::kNative, Algorithm::kHierarchical, Algorithm::kRing}) {
    auto comm = Make(a);
    ASSERT_TRUE(comm);
    float x = 0;
    Recording rec;
    EXPECT_TRUE(comm->AllReduce(&x, &x, 0, DType::kF32, ReduceOp::kSum).ok());
    rec.Stop();
    EXPECT_EQ(rec.calls().size(), 0u) << AlgorithmName(a) << ": " << Summary(rec.calls());
  }
}

// The ring's all-gather and reduce-scatter are point-to-point too; the
// other algorithms use MPI's own collective, once.
TEST(AlgorithmCalls, RingAllGatherAndReduceScatterArePointToPoint) {
  const int P = g_runtime->size();
  const size_t n = 100;  // per rank: 400 bytes of f32, 7 chunks of 64 bytes
  const size_t chunks_f32 = (n * 4 + kChunkBytes - 1) / kChunkBytes;
  auto in = Ones(DType::kF32, n * static_cast<size_t>(P)), out = Ones(DType::kF32, n * static_cast<size_t>(P));
  for (Algorithm a : {Algorithm::kRing, Algorithm::kNative}) {
    auto comm = Make(a);
    ASSERT_TRUE(comm);
    {
      Recording rec;
      EXPECT_TRUE(comm->AllGather(in.data(), out.data(), n, DType::kF32).ok());
      rec.Stop();
      const auto calls = rec.calls();
      if (a == Algorithm::kRing) {
        // Each of the P-1 steps sends one block of n*4 bytes in chunks of 64 bytes (as u8).
        const size_t want = static_cast<size_t>(P - 1) * ((n * 4 + kChunkBytes - 1) / kChunkBytes);
        EXPECT_EQ(static_cast<size_t>(CountOf(calls, kIsend)), want) << "all_gather: " << Summary(calls);
        EXPECT_EQ(CountOf(calls, kAllgather), 0) << Summary(calls);
      } else {
        EXPECT_EQ(CountOf(calls, kAllgather), 1) << Summary(calls);
        EXPECT_EQ(calls.size(), 1u) << Summary(calls);
      }
    }
    {
      Recording rec;
      EXPECT_TRUE(comm->ReduceScatter(in.data(), out.data(), n, DType::kF32, ReduceOp::kSum).ok());
      rec.Stop();
      const auto calls = rec.calls();
      if (a == Algorithm::kRing) {
        const size_t want = static_cast<size_t>(P - 1) * chunks_f32;
        EXPECT_EQ(static_cast<size_t>(CountOf(calls, kIsend)), want) << "reduce_scatter: " << Summary(calls);
        EXPECT_EQ(CountOf(calls, kReduceScatterBlock), 0) << Summary(calls);
      } else {
        EXPECT_EQ(CountOf(calls, kReduceScatterBlock), 1) << Summary(calls);
        EXPECT_EQ(calls.size(), 1u) << Summary(calls);
      }
    }
  }
}

}  // namespace
}  // namespace baton
