// baton::Bucketer on the mpi backend, every algorithm: the results equal
// reducing each array alone, and the number of AllReduce calls equals the
// ceil-packing count (per dtype, ceil(bytes of the arrays that fit in a
// bucket / bucket bytes), plus one per array larger than a bucket), counted
// both by the Bucketer and by a Communicator wrapped around the real one.
// Inputs are small integers, so every result is exact and compared bit for
// bit. Run at 1, 2, 3 and 8 ranks (make check) and on the local cluster.
#include <mpi.h>

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "baton/bucketer.h"
#include "baton/communicator.h"
#include "tests/lib/test_runtime.h"

namespace baton {
namespace {

using testing::g_runtime;

// Forwards to a real communicator and records every AllReduce it is asked for.
class CountingComm : public Communicator {
 public:
  struct Reduction {
    void* recv;
    size_t count;
    DType dtype;
  };
  explicit CountingComm(Communicator* real) : real_(real) {}
  int rank() const override { return real_->rank(); }
  int size() const override { return real_->size(); }
  Backend backend() const override { return real_->backend(); }
  int device() const override { return real_->device(); }
  Status AllReduce(const void* send, void* recv, size_t count, DType t, ReduceOp op) override {
    reductions.push_back(Reduction{recv, count, t});
    return real_->AllReduce(send, recv, count, t, op);
  }
  Status AllGather(const void* s, void* r, size_t n, DType t) override { return real_->AllGather(s, r, n, t); }
  Status ReduceScatter(const void* s, void* r, size_t n, DType t, ReduceOp op) override {
    return real_->ReduceScatter(s, r, n, t, op);
  }
  Status Broadcast(void* b, size_t n, DType t, int root) override { return real_->Broadcast(b, n, t, root); }
  Status AllToAll(const void* s, void* r, size_t n, DType t) override { return real_->AllToAll(s, r, n, t); }
  Status Barrier() override { return real_->Barrier(); }
  Status IAllReduce(const void* s, void* r, size_t n, DType t, ReduceOp op, std::unique_ptr<Request>* q) override {
    return real_->IAllReduce(s, r, n, t, op, q);
  }
  Status IAllGather(const void* s, void* r, size_t n, DType t, std::unique_ptr<Request>* q) override {
    return real_->IAllGather(s, r, n, t, q);
  }
  Status IReduceScatter(const void* s, void* r, size_t n, DType t, ReduceOp op,
                        std::unique_ptr<Request>* q) override {
    return real_->IReduceScatter(s, r, n, t, op, q);
  }
  Status IBroadcast(void* b, size_t n, DType t, int root, std::unique_ptr<Request>* q) override {
    return real_->IBroadcast(b, n, t, root, q);
  }
  Status IAllToAll(const void* s, void* r, size_t n, DType t, std::unique_ptr<Request>* q) override {
    return real_->IAllToAll(s, r, n, t, q);
  }
  Status IBarrier(std::unique_ptr<Request>* q) override { return real_->IBarrier(q); }
  Status AllGatherV(const void* s, void* r, const std::vector<size_t>& n, DType t) override {
    return real_->AllGatherV(s, r, n, t);
  }
  Status ReduceScatterV(const void* s, void* r, const std::vector<size_t>& n, DType t, ReduceOp op) override {
    return real_->ReduceScatterV(s, r, n, t, op);
  }
  Status IAllGatherV(const void* s, void* r, const std::vector<size_t>& n, DType t,
                     std::unique_ptr<Request>* q) override {
    return real_->IAllGatherV(s, r, n, t, q);
  }
  Status IReduceScatterV(const void* s, void* r, const std::vector<size_t>& n, DType t, ReduceOp op,
                         std::unique_ptr<Request>* q) override {
    return real_->IReduceScatterV(s, r, n, t, op, q);
  }

  std::vector<Reduction> reductions;

 private:
  Communicator* real_;
};

// Element i of array k on rank r: a small integer (exact in every dtype).
double Input(int r, size_t k, size_t i) { return static_cast<double>((r * 7 + k * 5 + i * 3) % 5); }


struct Spec {
  size_t count;
  DType dtype;
};

struct Case {
  std::string name;
  std::vector<Spec> arrays;
  size_t bucket_bytes;
};

// The ceil-packing count: per dtype, the arrays that fit in a bucket fill
// ceil(their elements / bucket elements) buckets; each larger one is one more.
size_t ExpectedReductions(const std::vector<Spec>& arrays, size_t bucket_bytes) {
  size_t small[7] = {}, large = 0;
  for (const Spec& a : arrays) {
    const size_t cap = bucket_bytes / DTypeSize(a.dtype);
    if (a.count == 0) continue;
    if (a.count > cap) ++large;
    else small[static_cast<int>(a.dtype)] += a.count;
  }
  size_t n = large;
  for (int d = 0; d < 7; ++d) {
    const size_t cap = bucket_bytes / DTypeSize(static_cast<DType>(d));
    if (small[d] > 0) n += (small[d] + cap - 1) / cap;
  }
  return n;
}

std::vector<Spec> Cycle(size_t n, std::vector<size_t> sizes, DType t) {
  std::vector<Spec> out;
  for (size_t i = 0; i < n; ++i) out.push_back({sizes[i % sizes.size()], t});
  return out;
}

std::vector<Case> Cases() {
  std::vector<Case> c;
  // 40 arrays of 0..1024 f32 elements, 1024 being exactly one bucket.
  c.push_back({"many_small", Cycle(40, {0, 1, 3, 7, 13, 64, 100, 255, 1024, 17}, DType::kF32), 4096});
  // One array of 100003 f32 in 4 KiB buckets: reduced alone, in place.
  c.push_back({"one_huge", {{100003, DType::kF32}}, 4096});
  // Small and huge arrays interleaved, and one of bucket size + 1.
  c.push_back({"mixed",
               {{5, DType::kF32}, {20000, DType::kF32}, {0, DType::kF32}, {999, DType::kF32}, {1025, DType::kF32},
                {1, DType::kF32}, {31337, DType::kF32}, {1024, DType::kF32}, {77, DType::kF32}},
               4096});
  // Tiny buckets (two f32 each): arrays straddle many buckets.
  c.push_back({"tiny_buckets", Cycle(12, {1, 2, 3, 0, 5}, DType::kF32), 8});
  // Every floating dtype at once, 1000-byte buckets (not a multiple of 8).
  std::vector<Spec> dtypes;
  for (DType t : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16})
    for (size_t n : {size_t{0}, size_t{1}, size_t{33}, size_t{120}, size_t{501}, size_t{700}}) dtypes.push_back({n, t});
  c.push_back({"float_dtypes", dtypes, 1000});
  // Integer dtypes (sum and max only).
  std::vector<Spec> ints;
  for (DType t : {DType::kI32, DType::kI64, DType::kU8})
    for (size_t n : {size_t{7}, size_t{0}, size_t{250}, size_t{1001}, size_t{3}}) ints.push_back({n, t});
  c.push_back({"int_dtypes", ints, 1000});
  return c;
}

using Param = std::tuple<size_t, Algorithm>;  // case index, algorithm

class BucketerTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    CommOptions o;
    o.backend = Backend::kMpi;
    o.algorithm = std::get<1>(GetParam());
    o.ring_chunk_bytes = 256;
    Status s = CreateCommunicator(*g_runtime, o, &comm_);
    ASSERT_TRUE(s.ok()) << s;
  }
  const Case& c() const {
    static const std::vector<Case> cases = Cases();
    return cases[std::get<0>(GetParam())];
  }
  std::unique_ptr<Communicator> comm_;
};

TEST_P(BucketerTest, EqualsReducingEachArrayAloneWithTheCeilPackingCount) {
  const Case& cs = c();
  bool all_floating = true;
  for (const Spec& a : cs.arrays) all_floating = all_floating && IsFloating(a.dtype);
  std::vector<ReduceOp> ops = {ReduceOp::kSum, ReduceOp::kMax};
  if (all_floating) ops.push_back(ReduceOp::kAvg);

  const size_t want_reductions = ExpectedReductions(cs.arrays, cs.bucket_bytes);
  CountingComm counting(comm_.get());
  BucketerOptions options;
  options.bucket_bytes = cs.bucket_bytes;
  Bucketer bucketer(&counting, options);
  uint64_t total = 0;

  for (ReduceOp op : ops) {
    const int r = comm_->rank();
    std::vector<std::vector<char>> bucketed(cs.arrays.size()), alone(cs.arrays.size());
    std::vector<BucketArray> list;
    for (size_t k = 0; k < cs.arrays.size(); ++k) {
      const Spec& a = cs.arrays[k];
      bucketed[k].assign(a.count * DTypeSize(a.dtype) + 1, 0);
      for (size_t i = 0; i < a.count; ++i) StoreValue(a.dtype, Input(r, k, i), bucketed[k].data(), i);
      alone[k] = bucketed[k];
      list.push_back(BucketArray{bucketed[k].data(), a.count, a.dtype});
    }

    counting.reductions.clear();
    Status s = bucketer.AllReduce(list, op);
    ASSERT_TRUE(s.ok()) << s;
    total += want_reductions;
    EXPECT_EQ(bucketer.last_reductions(), want_reductions) << ReduceOpName(op);
    EXPECT_EQ(counting.reductions.size(), want_reductions) << ReduceOpName(op) << ": AllReduce calls seen";
    EXPECT_EQ(bucketer.total_reductions(), total);

    // No reduction exceeds a bucket unless it is a large array, in place.
    for (const auto& red : counting.reductions) {
      if (red.count * DTypeSize(red.dtype) <= cs.bucket_bytes) continue;
      bool is_array = false;
      for (size_t k = 0; k < list.size(); ++k) is_array = is_array || (red.recv == list[k].data && red.count == list[k].count);
      EXPECT_TRUE(is_array) << "a reduction of " << red.count << " elements is larger than a bucket and is no array";
    }
    // Every array larger than a bucket is reduced where it is (no copy).
    for (size_t k = 0; k < list.size(); ++k) {
      if (list[k].count <= cs.bucket_bytes / DTypeSize(list[k].dtype)) continue;
      bool found = false;
      for (const auto& red : counting.reductions) found = found || red.recv == list[k].data;
      EXPECT_TRUE(found) << "array " << k << " (" << list[k].count << " elements) was copied";
    }

    // The reference: every array alone, through the same communicator.
    for (size_t k = 0; k < cs.arrays.size(); ++k) {
      const Spec& a = cs.arrays[k];
      Status sa = comm_->AllReduce(alone[k].data(), alone[k].data(), a.count, a.dtype, op);
      ASSERT_TRUE(sa.ok()) << sa;
    }
    size_t bad = 0;
    for (size_t k = 0; k < cs.arrays.size(); ++k) bad += bucketed[k] == alone[k] ? 0 : 1;
    EXPECT_EQ(bad, 0u) << ReduceOpName(op) << ": " << bad << " of " << cs.arrays.size() << " arrays differ";
  }
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  return Cases()[std::get<0>(info.param)].name + "_" + std::string(AlgorithmName(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(Mpi, BucketerTest,
                         ::testing::Combine(::testing::Range(size_t{0}, Cases().size()),
                                            ::testing::Values(Algorithm::kNative, Algorithm::kHierarchical,
                                                              Algorithm::kRing)),
                         Name);

std::unique_ptr<Communicator> NativeComm() {
  CommOptions o;
  o.backend = Backend::kMpi;
  o.algorithm = Algorithm::kNative;
  std::unique_ptr<Communicator> comm;
  Status s = CreateCommunicator(*g_runtime, o, &comm);
  EXPECT_TRUE(s.ok()) << s;
  return comm;
}

TEST(Bucketer, DefaultBucketIs25MiBAndFusesManySmallArraysIntoOne) {
  auto comm = NativeComm();
  ASSERT_TRUE(comm);
  Bucketer bucketer(comm.get());
  EXPECT_EQ(bucketer.options().bucket_bytes, size_t{25} << 20);
  // 300 arrays, 1.2 MB in all: one bucket.
  std::vector<std::vector<float>> grads;
  std::vector<BucketArray> list;
  for (size_t k = 0; k < 300; ++k) grads.emplace_back(1000 + k % 7, static_cast<float>(comm->rank() + 1));
  for (auto& g : grads) list.push_back({g.data(), g.size(), DType::kF32});
  ASSERT_TRUE(bucketer.AllReduce(list, ReduceOp::kAvg).ok());
  EXPECT_EQ(bucketer.last_reductions(), 1u);
  const float P = static_cast<float>(comm->size());
  const float want = (P + 1) / 2;  // the average of 1..P, exact for P <= 8 in f32 here
  size_t bad = 0;
  for (auto& g : grads)
    for (float v : g) bad += v == want ? 0 : 1;
  EXPECT_EQ(bad, 0u);
}

TEST(Bucketer, EmptyListIssuesNothing) {
  auto comm = NativeComm();
  ASSERT_TRUE(comm);
  CountingComm counting(comm.get());
  Bucketer bucketer(&counting);
  float x = 1;
  ASSERT_TRUE(bucketer.AllReduce({}, ReduceOp::kSum).ok());
  ASSERT_TRUE(bucketer.AllReduce({{&x, 0, DType::kF32}, {nullptr, 0, DType::kI32}}, ReduceOp::kSum).ok());
  EXPECT_EQ(bucketer.last_reductions(), 0u);
  EXPECT_EQ(bucketer.total_reductions(), 0u);
  EXPECT_TRUE(counting.reductions.empty());
}

// Bad arguments are refused on every rank before any reduction, so no
// rank is left waiting in a collective.
TEST(Bucketer, BadArgumentsAreRefusedBeforeAnyReduction) {
  auto comm = NativeComm();
  ASSERT_TRUE(comm);
  CountingComm counting(comm.get());
  std::vector<float> f(10, 1.0f);
  std::vector<int32_t> i(10, 1);
  {
    Bucketer b(&counting);
    Status s = b.AllReduce({{f.data(), f.size(), DType::kF32}, {i.data(), i.size(), DType::kI32}}, ReduceOp::kAvg);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("i32"), std::string::npos) << s;
    s = b.AllReduce({{f.data(), f.size(), DType::kF32}, {nullptr, 3, DType::kF32}}, ReduceOp::kSum);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("array 1"), std::string::npos) << s;
    EXPECT_EQ(b.total_reductions(), 0u);
  }
  {
    BucketerOptions o;
    o.bucket_bytes = 0;
    Bucketer b(&counting, o);
    EXPECT_EQ(b.AllReduce({{f.data(), f.size(), DType::kF32}}, ReduceOp::kSum).code(), Code::kInvalidArgument);
  }
  EXPECT_TRUE(counting.reductions.empty());
  EXPECT_EQ(f, std::vector<float>(10, 1.0f)) << "nothing was reduced";
}

// A training loop calls the same Bucketer every step: buffers are reused,
// counts accumulate.
TEST(Bucketer, RepeatedCallsAccumulateTheTotal) {
  auto comm = NativeComm();
  ASSERT_TRUE(comm);
  BucketerOptions o;
  o.bucket_bytes = 64;  // 16 f32
  Bucketer bucketer(comm.get(), o);
  std::vector<float> a(10), b(10), c(40);
  for (int step = 1; step <= 3; ++step) {
    std::fill(a.begin(), a.end(), 1.0f);
    std::fill(b.begin(), b.end(), 2.0f);
    std::fill(c.begin(), c.end(), 3.0f);
    // a+b = 20 elements: 2 buckets; c (40 > 16) alone: 3 reductions a step.
    ASSERT_TRUE(bucketer.AllReduce({{a.data(), 10, DType::kF32}, {b.data(), 10, DType::kF32}, {c.data(), 40, DType::kF32}},
                                   ReduceOp::kSum)
                    .ok());
    EXPECT_EQ(bucketer.last_reductions(), 3u);
    EXPECT_EQ(bucketer.total_reductions(), 3u * static_cast<uint64_t>(step));
    const float P = static_cast<float>(comm->size());
    EXPECT_EQ(a, std::vector<float>(10, P));
    EXPECT_EQ(b, std::vector<float>(10, 2 * P));
    EXPECT_EQ(c, std::vector<float>(40, 3 * P));
  }
}

}  // namespace
}  // namespace baton
