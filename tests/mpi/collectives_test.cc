// Every primitive x dtype x algorithm x size of the mpi backend against a
// reference computed from every rank's input. Run at 1, 2, 3 and 8 ranks
// (make check) and across the four nodes of the local cluster.
//
// Sizes are classes, not numbers: each launch turns them into counts for its
// own rank count P, so each launch tests something the others do not: one
// element (fewer than the ranks: most ring blocks empty), P + 1 (one block
// longer than the rest, never a multiple of P) and 333 * P + 1 (many 64-byte
// ring chunks, odd for even P, never a multiple of P). A test's name does not
// carry P, so the tally counts it once however many launches ran it. Zero
// elements is one case of its own (ZeroCount), not a size of every test.
//
// Tolerance: none. Inputs are small integers, so every sum is exact even in
// bf16, and f16/bf16 results are computed the way the backend promises
// (reduced in f32, rounded once): the reference rounds the f32 result once
// with the same conversion, and the comparison is bit-exact.
#include <mpi.h>

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <tuple>
#include <vector>

#include "baton/communicator.h"
#include "tests/lib/test_runtime.h"

namespace baton {
namespace {

using testing::g_runtime;

// Input element i of rank r: a small integer.
double Input(int r, size_t i) { return static_cast<double>((r * 7 + i * 3) % 5); }


std::vector<char> Buffer(DType t, size_t n) { return std::vector<char>(n * DTypeSize(t) + 1); }

// Whether op reduces t (CheckReducible): where not, the call must refuse it
// by name (ExpectRefused) and the test moves on.
bool Reducible(DType t, ReduceOp op) { return CheckReducible(t, op).ok(); }
void ExpectRefused(const Status& s, DType t, ReduceOp op) {
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << ReduceOpName(op) << " on " << DTypeName(t) << ": " << s;
  EXPECT_NE(s.message().find("reduce op " + std::string(ReduceOpName(op)) + " on dtype " + std::string(DTypeName(t))),
            std::string::npos)
      << s;
}

// The reduced value as the backend computes it: exact for sum/max/min of
// these inputs; avg divides the f32 (or f64) sum once.
double Reference(ReduceOp op, int P, size_t i, DType t) {
  double acc = Input(0, i);
  for (int r = 1; r < P; ++r) {
    double v = Input(r, i);
    acc = op == ReduceOp::kMax ? std::max(acc, v) : op == ReduceOp::kMin ? std::min(acc, v) : acc + v;
  }
  if (op == ReduceOp::kAvg) acc = t == DType::kF64 ? acc / P : static_cast<float>(acc) / static_cast<float>(P);
  return acc;
}

bool SameBits(DType t, const void* a, const void* b, size_t i) {
  const size_t e = DTypeSize(t);
  return std::memcmp(static_cast<const char*>(a) + i * e, static_cast<const char*>(b) + i * e, e) == 0;
}

// Counts per launch; see the comment at the top.
enum class Size { kOne, kRanksPlusOne, kManyChunks };

const char* SizeName(Size z) {
  switch (z) {
    case Size::kOne: return "one";
    case Size::kRanksPlusOne: return "ranks_plus_1";
    case Size::kManyChunks: return "333ranks_plus_1";
  }
  return "?";
}

size_t Count(Size z, int P) {
  switch (z) {
    case Size::kOne: return 1;
    case Size::kRanksPlusOne: return static_cast<size_t>(P) + 1;
    case Size::kManyChunks: return 333 * static_cast<size_t>(P) + 1;
  }
  return 0;
}

using Param = std::tuple<DType, Algorithm, Size>;

class Collectives : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    CommOptions o;
    o.backend = Backend::kMpi;
    o.algorithm = std::get<1>(GetParam());
    o.ring_chunk_bytes = 64;  // many chunks even for small sizes: exercises the pipelining
    Status s = CreateCommunicator(*g_runtime, o, &comm_);
    ASSERT_TRUE(s.ok()) << s;
  }
  DType t() const { return std::get<0>(GetParam()); }
  size_t n() const { return Count(std::get<2>(GetParam()), comm_->size()); }
  int P() const { return comm_->size(); }
  int R() const { return comm_->rank(); }
  std::unique_ptr<Communicator> comm_;
};

TEST_P(Collectives, AllReduceEveryOp) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg}) {
    if (!Reducible(t(), op)) {
      auto in = Buffer(t(), 1), out = Buffer(t(), 1);
      ExpectRefused(comm_->AllReduce(in.data(), out.data(), 1, t(), op), t(), op);
      continue;
    }
    auto in = Buffer(t(), n()), out = Buffer(t(), n()), want = Buffer(t(), n());
    for (size_t i = 0; i < n(); ++i) {
      StoreValue(t(), Input(R(), i), in.data(), i);
      StoreValue(t(), Reference(op, P(), i, t()), want.data(), i);
    }
    Status s = comm_->AllReduce(in.data(), out.data(), n(), t(), op);
    ASSERT_TRUE(s.ok()) << s;
    size_t bad = 0;
    for (size_t i = 0; i < n(); ++i) bad += SameBits(t(), out.data(), want.data(), i) ? 0 : 1;
    EXPECT_EQ(bad, 0u) << ReduceOpName(op) << ": " << bad << " of " << n() << " elements differ";
  }
}

TEST_P(Collectives, AllReduceInPlace) {
  if (!Reducible(t(), ReduceOp::kSum)) return;  // refused: AllReduceEveryOp
  auto buf = Buffer(t(), n()), want = Buffer(t(), n());
  for (size_t i = 0; i < n(); ++i) {
    StoreValue(t(), Input(R(), i), buf.data(), i);
    StoreValue(t(), Reference(ReduceOp::kSum, P(), i, t()), want.data(), i);
  }
  ASSERT_TRUE(comm_->AllReduce(buf.data(), buf.data(), n(), t(), ReduceOp::kSum).ok());
  EXPECT_EQ(std::memcmp(buf.data(), want.data(), n() * DTypeSize(t())), 0);
}

TEST_P(Collectives, ReduceScatterSumAndMax) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    // Block b of rank r's input holds Input(r, b*n + i).
    auto in = Buffer(t(), n() * P()), out = Buffer(t(), n()), want = Buffer(t(), n());
    if (!Reducible(t(), op)) {
      ExpectRefused(comm_->ReduceScatter(in.data(), out.data(), n(), t(), op), t(), op);
      continue;
    }
    for (size_t i = 0; i < n() * P(); ++i) StoreValue(t(), Input(R(), i), in.data(), i);
    for (size_t i = 0; i < n(); ++i) StoreValue(t(), Reference(op, P(), R() * n() + i, t()), want.data(), i);
    Status s = comm_->ReduceScatter(in.data(), out.data(), n(), t(), op);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(std::memcmp(out.data(), want.data(), n() * DTypeSize(t())), 0) << ReduceOpName(op);
  }
}

TEST_P(Collectives, AllGather) {
  auto in = Buffer(t(), n()), out = Buffer(t(), n() * P()), want = Buffer(t(), n() * P());
  for (size_t i = 0; i < n(); ++i) StoreValue(t(), Input(R(), i), in.data(), i);
  for (int r = 0; r < P(); ++r)
    for (size_t i = 0; i < n(); ++i) StoreValue(t(), Input(r, i), want.data(), r * n() + i);
  ASSERT_TRUE(comm_->AllGather(in.data(), out.data(), n(), t()).ok());
  EXPECT_EQ(std::memcmp(out.data(), want.data(), n() * P() * DTypeSize(t())), 0);
}

TEST_P(Collectives, BroadcastFromLastRank) {
  const int root = P() - 1;
  auto buf = Buffer(t(), n()), want = Buffer(t(), n());
  for (size_t i = 0; i < n(); ++i) {
    StoreValue(t(), Input(R(), i), buf.data(), i);
    StoreValue(t(), Input(root, i), want.data(), i);
  }
  ASSERT_TRUE(comm_->Broadcast(buf.data(), n(), t(), root).ok());
  EXPECT_EQ(std::memcmp(buf.data(), want.data(), n() * DTypeSize(t())), 0);
  EXPECT_EQ(comm_->Broadcast(buf.data(), n(), t(), P()).code(), Code::kInvalidArgument) << "root out of range";
}

TEST_P(Collectives, AllToAll) {
  // Block b of rank r's input goes to rank b; it holds Input(r*P + b, i).
  auto in = Buffer(t(), n() * P()), out = Buffer(t(), n() * P()), want = Buffer(t(), n() * P());
  for (int b = 0; b < P(); ++b)
    for (size_t i = 0; i < n(); ++i) {
      StoreValue(t(), Input(R() * P() + b, i), in.data(), b * n() + i);
      StoreValue(t(), Input(b * P() + R(), i), want.data(), b * n() + i);
    }
  ASSERT_TRUE(comm_->AllToAll(in.data(), out.data(), n(), t()).ok());
  EXPECT_EQ(std::memcmp(out.data(), want.data(), n() * P() * DTypeSize(t())), 0);
}

// Uneven blocks: rank r's count is odd and different from the others',
// except that rank 1 (and every third after it) has none.
std::vector<size_t> UnevenCounts(int P, size_t n) {
  std::vector<size_t> counts(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) counts[static_cast<size_t>(r)] = r % 3 == 1 ? 0 : n + 2 * static_cast<size_t>(r) + 1;
  return counts;
}

TEST_P(Collectives, AllGatherVUnevenCounts) {
  const std::vector<size_t> counts = UnevenCounts(P(), n());
  size_t total = 0, mine_at = 0;
  for (int r = 0; r < P(); ++r) {
    if (r == R()) mine_at = total;
    total += counts[static_cast<size_t>(r)];
  }
  const size_t mine = counts[static_cast<size_t>(R())];
  auto in = Buffer(t(), mine), out = Buffer(t(), total), want = Buffer(t(), total);
  for (size_t i = 0; i < mine; ++i) StoreValue(t(), Input(R(), i), in.data(), i);
  for (int r = 0, at = 0; r < P(); at += static_cast<int>(counts[static_cast<size_t>(r)]), ++r)
    for (size_t i = 0; i < counts[static_cast<size_t>(r)]; ++i) StoreValue(t(), Input(r, i), want.data(), at + i);
  Status s = comm_->AllGatherV(in.data(), out.data(), counts, t());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(std::memcmp(out.data(), want.data(), total * DTypeSize(t())), 0);
  // Non-blocking, and in place (send is this rank's block of recv).
  auto inplace = Buffer(t(), total);
  std::memcpy(inplace.data() + mine_at * DTypeSize(t()), in.data(), mine * DTypeSize(t()));
  std::unique_ptr<Request> req;
  ASSERT_TRUE(comm_->IAllGatherV(inplace.data() + mine_at * DTypeSize(t()), inplace.data(), counts, t(), &req).ok());
  s = req->Wait();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(std::memcmp(inplace.data(), want.data(), total * DTypeSize(t())), 0) << "non-blocking, in place";
}

TEST_P(Collectives, ReduceScatterVUnevenCounts) {
  const std::vector<size_t> counts = UnevenCounts(P(), n());
  size_t total = 0, mine_at = 0;
  for (int r = 0; r < P(); ++r) {
    if (r == R()) mine_at = total;
    total += counts[static_cast<size_t>(r)];
  }
  const size_t mine = counts[static_cast<size_t>(R())];
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
    auto in = Buffer(t(), total), out = Buffer(t(), mine), want = Buffer(t(), mine);
    if (!Reducible(t(), op)) {
      ExpectRefused(comm_->ReduceScatterV(in.data(), out.data(), counts, t(), op), t(), op);
      continue;
    }
    for (size_t i = 0; i < total; ++i) StoreValue(t(), Input(R(), i), in.data(), i);
    for (size_t i = 0; i < mine; ++i) StoreValue(t(), Reference(op, P(), mine_at + i, t()), want.data(), i);
    Status s = comm_->ReduceScatterV(in.data(), out.data(), counts, t(), op);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(std::memcmp(out.data(), want.data(), mine * DTypeSize(t())), 0) << ReduceOpName(op);
    auto again = Buffer(t(), mine);
    std::unique_ptr<Request> req;
    ASSERT_TRUE(comm_->IReduceScatterV(in.data(), again.data(), counts, t(), op, &req).ok());
    s = req->Wait();
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(std::memcmp(again.data(), want.data(), mine * DTypeSize(t())), 0) << "non-blocking " << ReduceOpName(op);
  }
}

TEST_P(Collectives, NonBlockingAllReducesInFlightTogether) {
  if (!Reducible(t(), ReduceOp::kMax)) return;  // refused: AllReduceEveryOp
  constexpr int kInFlight = 3;
  std::vector<std::vector<char>> in(kInFlight), out(kInFlight);
  std::vector<std::unique_ptr<Request>> reqs(kInFlight);
  for (int k = 0; k < kInFlight; ++k) {
    in[k] = Buffer(t(), n());
    out[k] = Buffer(t(), n());
    for (size_t i = 0; i < n(); ++i) StoreValue(t(), Input(R() + k, i), in[k].data(), i);
    ASSERT_TRUE(comm_->IAllReduce(in[k].data(), out[k].data(), n(), t(), ReduceOp::kMax, &reqs[k]).ok());
  }
  bool done = false;
  ASSERT_TRUE(reqs[0]->Test(&done).ok());
  for (int k = 0; k < kInFlight; ++k) {
    Status s = reqs[k]->Wait();
    ASSERT_TRUE(s.ok()) << s;
    for (size_t i = 0; i < n(); ++i) {
      double want = 0;
      for (int r = 0; r < P(); ++r) want = std::max(want, Input(r + k, i));
      auto w = Buffer(t(), n());
      StoreValue(t(), want, w.data(), i);
      ASSERT_TRUE(SameBits(t(), out[k].data(), w.data(), i)) << "request " << k << " element " << i;
    }
  }
  ASSERT_TRUE(reqs[0]->Test(&done).ok());
  EXPECT_TRUE(done);
  std::unique_ptr<Request> b;
  ASSERT_TRUE(comm_->IBarrier(&b).ok());
  EXPECT_TRUE(b->Wait().ok());
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(DTypeName(std::get<0>(info.param))) + "_" + std::string(AlgorithmName(std::get<1>(info.param))) +
         "_" + SizeName(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Mpi, Collectives,
    ::testing::Combine(::testing::ValuesIn(kAllDTypes),
                       ::testing::Values(Algorithm::kNative, Algorithm::kHierarchical, Algorithm::kRing),
                       ::testing::Values(Size::kOne, Size::kRanksPlusOne, Size::kManyChunks)),
    Name);

// Zero elements, every primitive (blocking and not), dtype and algorithm:
// succeeds and writes nothing (the byte past each buffer stays as set).
TEST(ZeroCount, EveryPrimitiveDtypeAndAlgorithm) {
  for (Algorithm a : {Algorithm::kNative, Algorithm::kHierarchical, Algorithm::kRing}) {
    CommOptions o;
    o.backend = Backend::kMpi;
    o.algorithm = a;
    o.ring_chunk_bytes = 64;
    std::unique_ptr<Communicator> comm;
    ASSERT_TRUE(CreateCommunicator(*g_runtime, o, &comm).ok());
    const std::vector<size_t> zeros(static_cast<size_t>(comm->size()), 0);
    for (DType t : kAllDTypes) {
      const std::string what = std::string(AlgorithmName(a)) + " " + std::string(DTypeName(t));
      char in = 'i', out = 'o';
      // The 8-bit floats are never reduced (refused even with no elements,
      // AllReduceEveryOp): here they only move. bool: max, not sum.
      const bool reduces = Reducible(t, ReduceOp::kMax);
      const ReduceOp sum = Reducible(t, ReduceOp::kSum) ? ReduceOp::kSum : ReduceOp::kMax;
      if (reduces) {
        EXPECT_TRUE(comm->AllReduce(&in, &out, 0, t, sum).ok()) << what;
        EXPECT_TRUE(comm->ReduceScatter(&in, &out, 0, t, ReduceOp::kMax).ok()) << what;
      }
      EXPECT_TRUE(comm->AllGather(&in, &out, 0, t).ok()) << what;
      EXPECT_TRUE(comm->Broadcast(&out, 0, t, comm->size() - 1).ok()) << what;
      EXPECT_TRUE(comm->AllToAll(&in, &out, 0, t).ok()) << what;
      EXPECT_TRUE(comm->AllGatherV(&in, &out, zeros, t).ok()) << what;
      std::unique_ptr<Request> r1, r2, r3;
      if (reduces) {
        EXPECT_TRUE(comm->ReduceScatterV(&in, &out, zeros, t, sum).ok()) << what;
        EXPECT_TRUE(comm->IAllReduce(&in, &out, 0, t, ReduceOp::kMin, &r1).ok()) << what;
        EXPECT_TRUE(comm->IReduceScatterV(&in, &out, zeros, t, sum, &r3).ok()) << what;
      }
      EXPECT_TRUE(comm->IAllGatherV(&in, &out, zeros, t, &r2).ok()) << what;
      for (auto* r : {&r1, &r2, &r3}) {
        if (!reduces && r != &r2) continue;
        if (!*r) {
          ADD_FAILURE() << what << ": no request";  // not ASSERT: the other ranks go on to collectives
          continue;
        }
        EXPECT_TRUE((*r)->Wait().ok()) << what;
      }
      EXPECT_EQ(in, 'i') << what;
      EXPECT_EQ(out, 'o') << what << ": a zero-count collective wrote into its output";
    }
  }
}

// What a training program needs (issue 14, item 11): 161 rows of 3
// columns split over the ranks as evenly as they go, gathered whole, and
// the gradient of the whole reduced to each rank's rows; a wrong number of
// counts is refused by name.
TEST(Uneven, RowsSplitOverTheRanks) {
  constexpr size_t kRows = 161, kCols = 3;
  for (Algorithm a : {Algorithm::kNative, Algorithm::kRing}) {
    CommOptions o;
    o.backend = Backend::kMpi;
    o.algorithm = a;
    std::unique_ptr<Communicator> comm;
    ASSERT_TRUE(CreateCommunicator(*g_runtime, o, &comm).ok());
    const int P = comm->size(), R = comm->rank();
    std::vector<size_t> counts(static_cast<size_t>(P));
    size_t first_row = 0;
    for (int r = 0; r < P; ++r) {
      const size_t rows = kRows / P + (static_cast<size_t>(r) < kRows % P ? 1 : 0);
      if (r < R) first_row += rows;
      counts[static_cast<size_t>(r)] = rows * kCols;
    }
    const size_t mine = counts[static_cast<size_t>(R)];
    std::vector<float> rows(mine), all(kRows * kCols);
    for (size_t i = 0; i < mine; ++i) rows[i] = static_cast<float>(first_row * kCols + i);
    ASSERT_TRUE(comm->AllGatherV(rows.data(), all.data(), counts, DType::kF32).ok());
    for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], static_cast<float>(i)) << AlgorithmName(a) << " " << i;
    std::vector<float> grad(kRows * kCols, 1.0f), my_grad(mine);
    ASSERT_TRUE(comm->ReduceScatterV(grad.data(), my_grad.data(), counts, DType::kF32, ReduceOp::kSum).ok());
    for (float g : my_grad) ASSERT_EQ(g, static_cast<float>(P)) << AlgorithmName(a);
    std::vector<size_t> wrong(counts.begin(), counts.end() - 1);
    Status s = comm->AllGatherV(rows.data(), all.data(), wrong, DType::kF32);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("all_gather_v: counts has " + std::to_string(P - 1) + " entries for " +
                               std::to_string(P) + " ranks"),
              std::string::npos)
        << s;
  }
}

TEST(Runtime, TopologyAgreesWithMpi) {
  const Runtime& rt = *g_runtime;
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(rt.rank(), rank);
  EXPECT_EQ(rt.size(), size);
  EXPECT_EQ(static_cast<int>(rt.topology().node_of.size()), size);
  EXPECT_EQ(rt.topology().RanksOn(rt.node_rank()).size(), static_cast<size_t>(rt.local_size()));
  EXPECT_EQ(rt.topology().RanksOn(rt.node_rank())[static_cast<size_t>(rt.local_rank())], rank);
  EXPECT_EQ(rt.leaders_comm() != MPI_COMM_NULL, rt.local_rank() == 0);
  if (const char* nodes = std::getenv("SLURM_STEP_NUM_NODES")) {
    EXPECT_EQ(rt.num_nodes(), std::atoi(nodes)) << "under srun the nodes are Slurm's";
    EXPECT_EQ(std::to_string(rt.node_rank()), std::getenv("SLURM_NODEID"));
  }
}

}  // namespace
}  // namespace baton
