// The nccl side of `baton bench collectives` (cli/nccl_bench.cc) on one
// rank, no GPU: the stand-in table's "device" memory is host memory and its
// one-rank collectives copy send to recv, so the whole loop runs here:
// upload, baton's collective, the raw NCCL call, the check, the medians,
// failures on this rank or another, and every buffer freed. The same loop
// runs on a real GPU in tests/gpu/run-gpu-tests.
#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "cli/collective_case.h"
#include "cli/nccl_bench.h"
#include "mpi_runtime/nccl/nccl_communicator.h"
#include "tests/lib/fake_nccl_api.h"

namespace baton::cli {
namespace {

using nccl::NcclCommunicator;
using nccl::testing::FakeNcclApi;
using nccl::testing::g_fake;
using std::chrono::milliseconds;

bool Has(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

std::unique_ptr<NcclCommunicator> OneRankComm() {
  nccl::NcclOptions o;
  o.init_timeout = o.op_timeout = milliseconds(200);
  auto c = std::make_unique<NcclCommunicator>(FakeNcclApi(), o);
  ncclUniqueId id;
  std::memset(&id, 3, sizeof id);
  EXPECT_TRUE(c->SetUpDevice(0).ok());
  EXPECT_TRUE(c->InitWorld(id, 0, 1).ok());
  EXPECT_TRUE(c->SplitNode(0).ok());
  EXPECT_TRUE(c->SplitLeaders(true).ok());
  return c;
}

// The raw baseline's own blocking communicator, beside `comm`.
std::unique_ptr<RawComm> Raw(const NcclCommunicator& comm) {
  std::unique_ptr<RawComm> raw;
  Status s = RawComm::Make(FakeNcclApi(), comm, RankSync::OneRank(), &raw);
  EXPECT_TRUE(s.ok()) << s;
  return raw;
}

NcclBenchOptions Few() {
  NcclBenchOptions o;
  o.iters = 4, o.warmup = 2;
  o.raw_timeout = milliseconds(200);
  return o;
}

using Param = std::tuple<Collective, DType, ReduceOp, size_t>;

class NcclBenchCase : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    nccl::testing::Reset();
    g_fake.one_rank_data = true;
  }
};

TEST_P(NcclBenchCase, MeasuresChecksAndFreesEverything) {
  const auto [coll, dtype, op, bytes] = GetParam();
  auto comm = OneRankComm();
  const int allocations_before = g_fake.live_allocations;
  const int collectives_before = g_fake.collectives;
  const Case c = Case::For(coll, dtype, op, 1, 0, bytes);
  Row row;
  Status s = MeasureNccl(*comm, *Raw(*comm), FakeNcclApi(), c, Few(), RankSync::OneRank(), &row);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(row.ok, 1);
  EXPECT_GE(row.time_us, 0);
  EXPECT_GE(row.raw_time_us, 0);
  // One checked call, then (warmup + iters) x (baton's + the raw one).
  EXPECT_EQ(g_fake.collectives - collectives_before, 1 + 2 * (2 + 4));
  EXPECT_EQ(g_fake.live_allocations, allocations_before) << "device buffers leaked";
}

INSTANTIATE_TEST_SUITE_P(
    OneRank, NcclBenchCase,
    ::testing::Values(Param{Collective::kAllReduce, DType::kF32, ReduceOp::kSum, 8},
                      Param{Collective::kAllReduce, DType::kBF16, ReduceOp::kMax, 1000},
                      Param{Collective::kAllReduce, DType::kF64, ReduceOp::kAvg, 4096},
                      Param{Collective::kAllReduce, DType::kU8, ReduceOp::kMin, 3},
                      Param{Collective::kAllGather, DType::kF16, ReduceOp::kSum, 100},
                      Param{Collective::kReduceScatter, DType::kI64, ReduceOp::kSum, 64},
                      Param{Collective::kBroadcast, DType::kI32, ReduceOp::kSum, 1 << 16},
                      Param{Collective::kAllToAll, DType::kF32, ReduceOp::kSum, 256}));

class NcclBench : public ::testing::Test {
 protected:
  void SetUp() override {
    nccl::testing::Reset();
    g_fake.one_rank_data = true;
  }
};

TEST_F(NcclBench, AWrongResultIsReportedNotHidden) {
  auto comm = OneRankComm();
  g_fake.one_rank_data = false;  // the collective leaves recv as it was (zeros)
  const Case c = Case::For(Collective::kAllReduce, DType::kF32, ReduceOp::kSum, 1, 0, 64);
  Row row;
  Status s = MeasureNccl(*comm, *Raw(*comm), FakeNcclApi(), c, Few(), RankSync::OneRank(), &row);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(row.ok, 0);
}

TEST_F(NcclBench, NoCheckLeavesOkUnset) {
  auto comm = OneRankComm();
  NcclBenchOptions o = Few();
  o.check = false;
  Row row;
  ASSERT_TRUE(MeasureNccl(*comm, *Raw(*comm), FakeNcclApi(), Case::For(Collective::kAllReduce, DType::kF32, ReduceOp::kSum, 1, 0, 64),
                          o, RankSync::OneRank(), &row)
                  .ok());
  EXPECT_EQ(row.ok, -1);
}

TEST_F(NcclBench, AFailedCollectiveStopsWithItsStatusAndFreesBuffers) {
  auto comm = OneRankComm();
  const int allocations_before = g_fake.live_allocations;
  g_fake.op = nccl::testing::Script::After(0, ncclSystemError);  // every collective fails asynchronously
  Row row;
  Status s = MeasureNccl(*comm, *Raw(*comm), FakeNcclApi(), Case::For(Collective::kAllReduce, DType::kF32, ReduceOp::kSum, 1, 0, 64),
                         Few(), RankSync::OneRank(), &row);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Has(s, "fake system error")) << s;
  EXPECT_EQ(g_fake.live_allocations, allocations_before);
}

TEST_F(NcclBench, AnEnqueueStillInProgressIsWaitedForBeforeTheStream) {
  auto comm = OneRankComm();
  // After every collective NCCL answers "in progress" to two polls first.
  g_fake.op = nccl::testing::Script::After(2, ncclSuccess);
  NcclBenchOptions o = Few();
  const int polls_before = g_fake.async_polls;
  Row row;
  Status s = MeasureNccl(*comm, *Raw(*comm), FakeNcclApi(), Case::For(Collective::kAllReduce, DType::kF32, ReduceOp::kSum, 1, 0, 64),
                         o, RankSync::OneRank(), &row);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(row.ok, 1);
  // Each of baton's 7 collectives polled until done; the raw ones, on a
  // blocking communicator, were on the stream when the call returned.
  EXPECT_GE(g_fake.async_polls - polls_before, 7 * 3);
}

TEST_F(NcclBench, AHangingRawCallEndsAtItsDeadline) {
  auto comm = OneRankComm();
  NcclBenchOptions o = Few();
  o.check = false;
  o.raw_timeout = milliseconds(100);
  // The benchmark's own stream (the second made, after the communicator's)
  // never drains: baton's collectives complete, the raw call hangs, and
  // only the benchmark's deadline for it ends the wait.
  g_fake.hanging_stream = 1;
  Row row;
  const auto t0 = std::chrono::steady_clock::now();
  Status s = MeasureNccl(*comm, *Raw(*comm), FakeNcclApi(), Case::For(Collective::kAllReduce, DType::kF32, ReduceOp::kSum, 1, 0, 64),
                         o, RankSync::OneRank(), &row);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kTimeout) << s;
  EXPECT_TRUE(Has(s, "raw nccl all_reduce did not complete within 100 ms")) << s;
  EXPECT_EQ(g_fake.aborts, 1) << "the raw baseline's communicator, and it alone, is aborted";
  EXPECT_FALSE(nccl::testing::FakeNccl::Of(comm->world_comm()).aborted);
  EXPECT_TRUE(comm->Barrier().ok()) << "baton's communicator is untouched";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

// The raw calls never touch baton's communicator, whose watchdog polls it
// from another thread: on the shared one, the benchmark's wait and the
// watchdog's ncclCommGetAsyncError finished (and freed) the same group job
// (measured with the old loop: 39 or 40 of its 40 raw calls freed twice,
// in each of 5 runs, with the window below). The raw
// baseline's own communicator is blocking, as nccl-tests makes it.
TEST_F(NcclBench, TheRawBaselineHasItsOwnBlockingCommunicator) {
  nccl::NcclOptions no;
  no.init_timeout = milliseconds(2000);
  no.op_timeout = milliseconds(20);  // the watchdog looks every millisecond
  NcclCommunicator comm(FakeNcclApi(), no);
  ncclUniqueId id;
  std::memset(&id, 3, sizeof id);
  ASSERT_TRUE(comm.SetUpDevice(0).ok());
  ASSERT_TRUE(comm.InitWorld(id, 0, 1).ok());
  g_fake.job_free_us = 2000;  // freeing a job takes 2 ms: a wide window
  NcclBenchOptions o = Few();
  o.check = false;
  o.warmup = 0, o.iters = 40;
  o.raw_timeout = milliseconds(5000);
  {
    std::unique_ptr<RawComm> raw = Raw(comm);
    ASSERT_NE(raw, nullptr);
    EXPECT_EQ(g_fake.blocking_inits, 1);
    const int world_before = nccl::testing::FakeNccl::Of(comm.world_comm()).collectives;
    Row row;
    Status s = MeasureNccl(comm, *raw, FakeNcclApi(), Case::For(Collective::kAllReduce, DType::kF32, ReduceOp::kSum, 1, 0, 64),
                           o, RankSync::OneRank(), &row);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(nccl::testing::FakeNccl::Of(comm.world_comm()).collectives - world_before, 40) << "baton's only";
    EXPECT_EQ(nccl::testing::FakeNccl::Of(raw->get()).collectives, 40);
    EXPECT_EQ(g_fake.double_frees, 0);
    EXPECT_EQ(g_fake.used_while_in_progress, 0);
  }
  EXPECT_EQ(g_fake.destroys, 1);  // the raw communicator, destroyed
}

TEST_F(NcclBench, AnotherRanksFailureStopsThisOneWithAborted) {
  auto comm = OneRankComm();
  int calls = 0;
  RankSync sync = RankSync::OneRank();
  sync.agree = [&calls](double seconds, bool failed, double* slowest, bool* any_failed) {
    *slowest = seconds;
    *any_failed = failed || ++calls == 3;  // the third step fails elsewhere
  };
  Row row;
  Status s = MeasureNccl(*comm, *Raw(*comm), FakeNcclApi(), Case::For(Collective::kAllReduce, DType::kF32, ReduceOp::kSum, 1, 0, 64),
                         Few(), sync, &row);
  EXPECT_EQ(s.code(), Code::kAborted) << s;
  EXPECT_TRUE(Has(s, "another rank failed")) << s;
}

TEST(CollectiveCase, NcclRowsNameTheirRawCallAndLeaveRawMpiNull) {
  const Case c = Case::For(Collective::kAllReduce, DType::kF32, ReduceOp::kSum, 1, 0, 64);
  Row row;
  row.time_us = 10, row.raw_time_us = 8, row.ok = 1;
  ::testing::internal::CaptureStdout();
  PrintRow(PrintSpec{true, Backend::kNccl, "nccl", 1}, c, row);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("\"backend\":\"nccl\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"raw\":\"nccl\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"nccl_time_us\":8"), std::string::npos) << out;
  EXPECT_NE(out.find("\"nccl_ratio\":0.8"), std::string::npos) << out;
  EXPECT_NE(out.find("\"mpi_time_us\":null"), std::string::npos) << out;
  EXPECT_NE(out.find("\"ok\":true"), std::string::npos) << out;
}

// --- the case itself ---------------------------------------------------------

TEST(CollectiveCase, SizesAndBusFactorsFollowNcclTests) {
  Case ar = Case::For(Collective::kAllReduce, DType::kF32, ReduceOp::kSum, 4, 0, 1024);
  EXPECT_EQ(ar.total(), 256u);
  EXPECT_DOUBLE_EQ(ar.BusFactor(), 2.0 * 3 / 4);
  Case ag = Case::For(Collective::kAllGather, DType::kF32, ReduceOp::kSum, 4, 0, 1000);
  EXPECT_EQ(ag.block, 62u);  // 250 elements, 4 blocks, rounded down
  EXPECT_EQ(ag.bytes(), 992u);
  EXPECT_DOUBLE_EQ(ag.BusFactor(), 3.0 / 4);
  Case tiny = Case::For(Collective::kReduceScatter, DType::kF64, ReduceOp::kSum, 8, 3, 1);
  EXPECT_EQ(tiny.block, 1u);  // never empty
  EXPECT_DOUBLE_EQ(Case::For(Collective::kBroadcast, DType::kU8, ReduceOp::kSum, 3, 0, 9).BusFactor(), 1.0);
}

TEST(CollectiveCase, AverageOfFloatsToleratesRoundingOnly) {
  const Case c = Case::For(Collective::kAllReduce, DType::kF32, ReduceOp::kAvg, 3, 0, 8);
  float want[2] = {1.0f / 3, 2.0f}, close[2] = {0.33333334f, 2.0000002f}, far[2] = {0.3333f, 2.1f};
  EXPECT_EQ(FirstMismatch(c, close, want), -1);
  EXPECT_EQ(FirstMismatch(c, far, want), 1);
  const Case s = Case::For(Collective::kAllReduce, DType::kF32, ReduceOp::kSum, 3, 0, 8);
  EXPECT_EQ(FirstMismatch(s, close, want), 1) << "sums are exact: any difference is a mismatch";
}

TEST(CollectiveCase, ReferenceOfEveryRankAgreesWithOneRankCopy) {
  // One rank: every collective's reference is its own input.
  for (Collective coll : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                          Collective::kAllToAll}) {
    const Case c = Case::For(coll, DType::kBF16, ReduceOp::kSum, 1, 0, 40);
    HostBuffers b;
    Fill(c, &b);
    EXPECT_EQ(FirstMismatch(c, b.send.data(), b.want.data()), -1) << CollectiveName(coll);
  }
}

}  // namespace
}  // namespace baton::cli
