// The nccl backend's control logic, single process, no GPU: creation that
// succeeds, fails at once, fails later, stays in progress for a while or
// hangs until the deadline; collectives that complete, fail or hang; which
// of them abort the NCCL communicators, and what the Status says. Driven
// through the stand-in table of tests/lib/fake_nccl_api.h.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "mpi_runtime/nccl/nccl_api.h"
#include "mpi_runtime/nccl/nccl_communicator.h"
#include "tests/lib/fake_nccl_api.h"

namespace baton::nccl {
namespace {

using std::chrono::milliseconds;
using testing::FakeNcclApi;
using testing::g_fake;
using testing::Script;
using Clock = std::chrono::steady_clock;

bool Has(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

class NcclControl : public ::testing::Test {
 protected:
  void SetUp() override { testing::Reset(); }

 public:
  // Short deadlines, so that the hanging cases take a fifth of a second.
  static NcclOptions Fast() {
    NcclOptions o;
    o.init_timeout = milliseconds(200);
    o.op_timeout = milliseconds(200);
    o.poll_interval = std::chrono::microseconds(1000);
    return o;
  }
  static ncclUniqueId Id() {
    ncclUniqueId id;
    std::memset(&id, 7, sizeof id);
    return id;
  }

 protected:
  static long long Ms(Clock::time_point since) {
    return std::chrono::duration_cast<milliseconds>(Clock::now() - since).count();
  }
  // A communicator of `size` ranks (this one `rank`) made through the stand-in.
  std::unique_ptr<NcclCommunicator> Ready(int rank = 0, int size = 1) {
    auto c = std::make_unique<NcclCommunicator>(FakeNcclApi(), Fast());
    EXPECT_TRUE(c->SetUpDevice(0).ok());
    EXPECT_TRUE(c->InitWorld(Id(), rank, size).ok());
    EXPECT_TRUE(c->SplitNode(0).ok());
    EXPECT_TRUE(c->SplitLeaders(true).ok());
    return c;
  }
  // Any non-null address the fake calls device memory.
  void* dev_ = reinterpret_cast<void*>(0x1000);
};

// ---- check helpers ----------------------------------------------------------

TEST_F(NcclControl, CheckNcclNamesTheCallTheErrorAndTheLine) {
  const NcclApi& api = FakeNcclApi();
  EXPECT_TRUE(BATON_NCCL_CHECK(api, api.GroupStart()).ok());
  Status s = BATON_NCCL_CHECK(api, ncclRemoteError);
  EXPECT_EQ(s.code(), Code::kIOError);
  Status c = CheckNccl(api, ncclSystemError, false, "api.AllReduce(a, b, n, t, o, c, s)", "x.cc", 12);
  EXPECT_EQ(c.component(), "runtime");
  EXPECT_TRUE(Has(c, "ncclAllReduce failed with 2 (fake system error) at x.cc:12")) << c;
  EXPECT_FALSE(Has(c, "api.")) << c;
  EXPECT_EQ(CheckNccl(api, ncclInvalidUsage, false, "f()", "x.cc", 1).code(), Code::kInvalidArgument);
  EXPECT_EQ(CheckNccl(api, ncclInternalError, false, "f()", "x.cc", 1).code(), Code::kInternal);
}

TEST_F(NcclControl, InProgressIsOkOnlyWhereTheCallIsNonBlocking) {
  const NcclApi& api = FakeNcclApi();
  EXPECT_TRUE(CheckNccl(api, ncclInProgress, true, "f()", "x.cc", 1).ok());
  EXPECT_FALSE(CheckNccl(api, ncclInProgress, false, "f()", "x.cc", 1).ok());
}

TEST_F(NcclControl, CheckCudaNamesTheCallAndMapsMissingDevicesToUnavailable) {
  const NcclApi& api = FakeNcclApi();
  Status s = CheckCuda(api, cudaErrorNoDevice, "api.SetDevice(3)", "y.cc", 7);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_TRUE(Has(s, "cudaSetDevice failed with 100 (fake: no CUDA-capable device is detected) at y.cc:7")) << s;
  EXPECT_EQ(CheckCuda(api, cudaErrorIllegalAddress, "f()", "y.cc", 7).code(), Code::kIOError);
  EXPECT_TRUE(CheckCuda(api, cudaSuccess, "f()", "y.cc", 7).ok());
}

TEST_F(NcclControl, CallNames) {
  EXPECT_EQ(CallName("api.CommSplit(p, 1, 2, &c, nullptr)", "nccl"), "ncclCommSplit");
  EXPECT_EQ(CallName("st.api->StreamQuery(s)", "cuda"), "cudaStreamQuery");
  EXPECT_EQ(CallName("api.CudaGetErrorString(rc)", "cuda"), "cudaGetErrorString");
  EXPECT_EQ(CallName("ncclGetUniqueId(&id)", "nccl"), "ncclGetUniqueId");
}

// ---- device -----------------------------------------------------------------

TEST_F(NcclControl, NoDeviceIsUnavailableWithCudasReason) {
  g_fake.device_count_error = cudaErrorNoDevice;
  EXPECT_FALSE(NcclDeviceVisible(FakeNcclApi()));
  NcclCommunicator c(FakeNcclApi(), Fast());
  Status s = c.SetUpDevice(0);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_TRUE(Has(s, "no CUDA device visible: cudaGetDeviceCount failed with 100 "
                     "(fake: no CUDA-capable device is detected)")) << s;
}

TEST_F(NcclControl, ZeroDevicesIsUnavailable) {
  g_fake.device_count = 0;
  EXPECT_FALSE(NcclDeviceVisible(FakeNcclApi()));
  int n = -1;
  Status s = CheckDeviceVisible(FakeNcclApi(), &n);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_TRUE(Has(s, "no CUDA device visible: cudaGetDeviceCount found 0 devices")) << s;
}

TEST_F(NcclControl, ADeviceBeyondTheVisibleOnesIsRefused) {
  g_fake.device_count = 2;
  EXPECT_TRUE(NcclDeviceVisible(FakeNcclApi()));
  NcclOptions o = Fast();
  o.device = 2;
  NcclCommunicator c(FakeNcclApi(), o);
  Status s = c.SetUpDevice(0);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_TRUE(Has(s, "CUDA device 2 asked for, but only 2 are visible")) << s;
}

// ---- creation: init ---------------------------------------------------------

TEST_F(NcclControl, InitThatSucceedsIsNotAborted) {
  ncclComm_t comm = nullptr;
  Status s = InitComm(FakeNcclApi(), Id(), 4, 1, Fast(), &comm);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_NE(comm, nullptr);
  EXPECT_EQ(g_fake.init_calls, 1);
  EXPECT_EQ(g_fake.blocking_inits, 0);  // non-blocking was asked
  EXPECT_EQ(g_fake.aborts, 0);
}

TEST_F(NcclControl, InitInProgressForSomePollsThenReady) {
  g_fake.init = Script::After(5, ncclSuccess);
  ncclComm_t comm = nullptr;
  Status s = InitComm(FakeNcclApi(), Id(), 2, 0, Fast(), &comm);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_NE(comm, nullptr);
  EXPECT_EQ(g_fake.async_polls, 6);  // five "in progress", one "success"
  EXPECT_EQ(g_fake.aborts, 0);
}

TEST_F(NcclControl, InitThatFailsAtOnceNamesTheCallAndAbortsNothing) {
  g_fake.init_call_result = ncclSystemError;
  ncclComm_t comm = nullptr;
  Status s = InitComm(FakeNcclApi(), Id(), 2, 1, Fast(), &comm);
  EXPECT_EQ(s.code(), Code::kIOError);
  EXPECT_TRUE(Has(s, "ncclCommInitRankConfig failed with 2 (fake system error)")) << s;
  EXPECT_EQ(comm, nullptr);
  EXPECT_EQ(g_fake.aborts, 0);  // NCCL made no communicator
  EXPECT_EQ(g_fake.async_polls, 0);
}

TEST_F(NcclControl, InitThatFailsLaterIsAbortedOnce) {
  g_fake.init = Script::After(3, ncclRemoteError);
  ncclComm_t comm = nullptr;
  Status s = InitComm(FakeNcclApi(), Id(), 3, 2, Fast(), &comm);
  EXPECT_EQ(s.code(), Code::kIOError);
  EXPECT_TRUE(Has(s, "ncclCommInitRankConfig (rank 2 of 3) failed: NCCL reported 6 (fake remote error): fake detail")) << s;
  EXPECT_TRUE(Has(s, "communicator aborted")) << s;
  EXPECT_EQ(comm, nullptr);
  EXPECT_EQ(g_fake.aborts, 1);
  EXPECT_TRUE(g_fake.comms.front().aborted);
  EXPECT_EQ(g_fake.async_polls, 4);
}

TEST_F(NcclControl, InitThatHangsStopsAtTheDeadlineAndIsAborted) {
  g_fake.init = Script::Hang();
  ncclComm_t comm = nullptr;
  const auto start = Clock::now();
  Status s = InitComm(FakeNcclApi(), Id(), 2, 0, Fast(), &comm);
  const long long ms = Ms(start);
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_TRUE(Has(s, "ncclCommInitRankConfig (rank 0 of 2) did not finish within init_timeout of 200 ms")) << s;
  EXPECT_EQ(comm, nullptr);
  EXPECT_EQ(g_fake.aborts, 1);
  EXPECT_GE(ms, 200);
  EXPECT_LT(ms, 3000);  // generous: a loaded CI machine
  // Polling stopped: no more polls than 1 ms naps fit in the deadline,
  // plus the ten of the ramp from 1 us.
  EXPECT_GE(g_fake.async_polls, 2);
  EXPECT_LE(g_fake.async_polls, 212);
}

// NCCL's abort joins the init thread, which may itself wait for the peer
// that never came: the abort of a failed creation is bounded as a
// collective's is (kReturn), or never waited for (kExit). `make` is a
// creation whose NCCL job hangs, with the options it is given.
using Creation = std::function<Status(const NcclOptions&)>;

// kReturn, an abort that never returns, abort_timeout 300 ms: `make`
// returns the Timeout saying the abort was left running, within 2 s.
void ExpectAbortLeftRunning(const Creation& make, const char* what) {
  testing::g_abort_hangs = true;
  NcclOptions o = NcclControl::Fast();
  o.abort_timeout = milliseconds(300);
  auto done = std::async(std::launch::async, [o, make] {
    const auto start = Clock::now();
    Status s = make(o);
    return std::make_pair(s, std::chrono::duration_cast<milliseconds>(Clock::now() - start).count());
  });
  const bool returned = done.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  testing::g_abort_hangs = false;  // lets the abort end either way
  ASSERT_TRUE(returned) << what << " waited on an abort that never returns";
  auto [s, ms] = done.get();
  EXPECT_EQ(s.code(), Code::kTimeout) << s;
  EXPECT_TRUE(Has(s, "ncclCommAbort did not return within 300 ms and was left running")) << s;
  EXPECT_LT(ms, 2000);
}

// kExit, an abort that would never return: `make` exits 75 at its deadline
// (the child's exit, which EXPECT_EXIT checks); 3 after 5 s, 6 if it returned.
[[noreturn]] void CreateUnderExit(const Creation& make) {
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(5));
    std::_Exit(3);
  }).detach();
  NcclOptions o = NcclControl::Fast();
  o.on_timeout = OnTimeout::kExit;
  testing::g_abort_hangs = true;
  (void)make(o);
  std::_Exit(6);
}

Status HangingInit(const NcclOptions& o) {
  g_fake.init = Script::Hang();
  ncclComm_t comm = nullptr;
  return InitComm(FakeNcclApi(), NcclControl::Id(), 2, 0, o, &comm);
}

TEST_F(NcclControl, AnInitsAbortIsBoundedByAbortTimeout) { ExpectAbortLeftRunning(HangingInit, "InitComm"); }

TEST_F(NcclControl, UnderExitAnInitPastItsDeadlineExits75BeforeAnyAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(CreateUnderExit(HangingInit), ::testing::ExitedWithCode(75),
              "did not finish within init_timeout of 200 ms.*exiting with 75");
}

// ---- creation: split --------------------------------------------------------

TEST_F(NcclControl, SplitThatSucceedsGivesAChild) {
  ncclComm_t world = nullptr, child = nullptr;
  ASSERT_TRUE(InitComm(FakeNcclApi(), Id(), 2, 0, Fast(), &world).ok());
  g_fake.split = Script::After(2, ncclSuccess);
  Status s = SplitComm(FakeNcclApi(), world, 3, 0, "node 3", Fast(), &child);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_NE(child, nullptr);
  EXPECT_EQ(g_fake.last_color, 3);
  EXPECT_EQ(g_fake.aborts, 0);
  EXPECT_EQ(g_fake.comms.back().split_share, 1) << "the child shares the parent's buffers and threads";
}

TEST_F(NcclControl, SplitWithoutAColorGivesNoChild) {
  NcclCommunicator c(FakeNcclApi(), Fast());
  ASSERT_TRUE(c.SetUpDevice(0).ok());
  ASSERT_TRUE(c.InitWorld(Id(), 1, 2).ok());
  ASSERT_TRUE(c.SplitNode(0).ok());
  Status s = c.SplitLeaders(false);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(g_fake.last_color, NCCL_SPLIT_NOCOLOR);
  EXPECT_NE(c.node_comm(), nullptr);
  EXPECT_EQ(c.leaders_comm(), nullptr);
}

TEST_F(NcclControl, SplitThatHangsAbortsTheParentThenTheChildAtTheDeadline) {
  ncclComm_t world = nullptr, child = nullptr;
  ASSERT_TRUE(InitComm(FakeNcclApi(), Id(), 2, 0, Fast(), &world).ok());
  g_fake.split = Script::Hang();
  const auto start = Clock::now();
  bool world_aborted = false;
  Status s = SplitComm(FakeNcclApi(), world, 0, 0, "node 0", Fast(), &child, &world_aborted);
  const long long ms = Ms(start);
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_TRUE(Has(s, "ncclCommSplit (node 0), parent did not finish within init_timeout of 200 ms")) << s;
  EXPECT_EQ(child, nullptr);
  // The parent stays in progress while the split's job runs: it is aborted
  // (which ends the job), then the child the job left.
  EXPECT_TRUE(world_aborted);
  EXPECT_EQ(g_fake.aborts, 2);
  EXPECT_TRUE(g_fake.comms.front().aborted);
  EXPECT_TRUE(g_fake.comms.back().aborted);
  EXPECT_GE(ms, 200);
  EXPECT_LT(ms, 3000);
}

// NCCL's split job writes the child's handle when it ends, on its own
// thread: a handle in SplitComm's frame is written after the frame died
// (a stack write), and the half-made child it names was never aborted.
TEST_F(NcclControl, TheSplitsHandleOutlivesATimeoutAndItsChildIsAborted) {
  ncclComm_t world = nullptr, child = nullptr;
  ASSERT_TRUE(InitComm(FakeNcclApi(), Id(), 2, 0, Fast(), &world).ok());
  g_fake.split = Script::Hang();
  Status s = SplitComm(FakeNcclApi(), world, 0, 0, "node 0", Fast(), &child);
  EXPECT_EQ(s.code(), Code::kTimeout) << s;
  // The owner of a parent left in progress aborts it (NcclState::Break
  // would); that ends the split's job, which then writes the handle.
  if (!g_fake.comms.front().aborted) FakeNcclApi().CommAbort(world);
  EXPECT_FALSE(g_fake.last_split_slot_on_stack) << "the split's handle lives in SplitComm's stack frame";
  EXPECT_EQ(g_fake.writes_into_dead_frame, 0) << "the split's job wrote into a returned frame";
  ASSERT_NE(g_fake.last_split_child, nullptr);
  EXPECT_TRUE(testing::FakeNccl::Of(g_fake.last_split_child).aborted) << "the half-made child was never aborted";
}

TEST_F(NcclControl, ASplitThatTimesOutBreaksTheCommunicator) {
  NcclCommunicator c(FakeNcclApi(), Fast());
  ASSERT_TRUE(c.SetUpDevice(0).ok());
  ASSERT_TRUE(c.InitWorld(Id(), 0, 2).ok());
  g_fake.split = Script::Hang();
  Status s = c.SplitNode(0);
  EXPECT_EQ(s.code(), Code::kTimeout) << s;
  Status after = c.Barrier();
  EXPECT_FALSE(after.ok());
  EXPECT_TRUE(Has(after, "did not finish within init_timeout")) << after;
}

// Issue 31, item 5, for the split as for the init: NCCL's abort of the
// parent joins the split's job, which may wait for a missing peer, so the
// abort is bounded (kReturn) or never made (kExit).
Status HangingSplit(const NcclOptions& o) {
  ncclComm_t world = nullptr;
  ncclComm_t child = nullptr;
  Status s = InitComm(FakeNcclApi(), NcclControl::Id(), 2, 0, o, &world);
  if (!s.ok()) return s;
  g_fake.split = Script::Hang();
  return SplitComm(FakeNcclApi(), world, 0, 0, "node 0", o, &child);
}

TEST_F(NcclControl, ASplitsAbortIsBoundedByAbortTimeout) { ExpectAbortLeftRunning(HangingSplit, "SplitComm"); }

TEST_F(NcclControl, UnderExitASplitPastItsDeadlineExits75BeforeAnyAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(CreateUnderExit(HangingSplit), ::testing::ExitedWithCode(75),
              "ncclCommSplit \\(node 0\\), parent did not finish within init_timeout of 200 ms.*exiting with 75");
}

TEST_F(NcclControl, SplitThatIsRefusedAbortsNothing) {
  ncclComm_t world = nullptr, child = nullptr;
  ASSERT_TRUE(InitComm(FakeNcclApi(), Id(), 2, 0, Fast(), &world).ok());
  g_fake.split_call_result = ncclInvalidUsage;
  Status s = SplitComm(FakeNcclApi(), world, 0, 0, "node 0", Fast(), &child);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_TRUE(Has(s, "ncclCommSplit failed with 5 (fake invalid usage)")) << s;
  EXPECT_EQ(g_fake.aborts, 0);
}

TEST_F(NcclControl, SplitThatFailsLaterIsAborted) {
  ncclComm_t world = nullptr, child = nullptr;
  ASSERT_TRUE(InitComm(FakeNcclApi(), Id(), 2, 0, Fast(), &world).ok());
  g_fake.split = Script::After(1, ncclInternalError);
  Status s = SplitComm(FakeNcclApi(), world, 0, 0, "leaders", Fast(), &child);
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_TRUE(Has(s, "ncclCommSplit (leaders), parent failed: NCCL reported 3 (fake internal error)")) << s;
  EXPECT_EQ(g_fake.aborts, 2);  // the parent, then the child
}

// ---- types --------------------------------------------------------------------

TEST_F(NcclControl, EveryDTypeMapsToNcclsType) {
  const std::pair<DType, ncclDataType_t> pairs[] = {
      {DType::kF32, ncclFloat32}, {DType::kF64, ncclFloat64}, {DType::kBF16, ncclBfloat16},
      {DType::kF16, ncclFloat16}, {DType::kI32, ncclInt32},   {DType::kI64, ncclInt64},
      {DType::kU8, ncclUint8},    {DType::kI8, ncclInt8},     {DType::kU32, ncclUint32},
      {DType::kU64, ncclUint64},  {DType::kBool, ncclUint8},  {DType::kF8E4M3, ncclUint8},
      {DType::kF8E5M2, ncclUint8}, {DType::kI16, ncclFloat16}, {DType::kU16, ncclFloat16}};
  static_assert(sizeof pairs / sizeof pairs[0] == kNumDTypes, "every dtype");
  for (auto [d, n] : pairs) {
    ncclDataType_t t;
    ASSERT_TRUE(ToNcclType(d, &t).ok()) << DTypeName(d);
    EXPECT_EQ(t, n) << DTypeName(d);
  }
}

TEST_F(NcclControl, AvgIsForFloatingTypesOnly) {
  ncclRedOp_t op;
  EXPECT_TRUE(ToNcclOp(ReduceOp::kAvg, DType::kBF16, &op).ok());
  EXPECT_EQ(op, ncclAvg);
  Status s = ToNcclOp(ReduceOp::kAvg, DType::kI64, &op);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_TRUE(Has(s, "reduce op avg on dtype i64: avg is for floating types only")) << s;
  EXPECT_TRUE(ToNcclOp(ReduceOp::kMax, DType::kU8, &op).ok());
  EXPECT_EQ(op, ncclMax);
}

// bool reduces by max and min only, the 8-bit floats not at all, and
// NCCL has no 16-bit integers: each refusal names the op and the dtype.
TEST_F(NcclControl, ReductionsThatMakeNoSenseAreRefused) {
  ncclRedOp_t op;
  EXPECT_TRUE(ToNcclOp(ReduceOp::kMax, DType::kBool, &op).ok());
  EXPECT_TRUE(ToNcclOp(ReduceOp::kSum, DType::kU64, &op).ok());
  const std::pair<ReduceOp, DType> refused[] = {{ReduceOp::kSum, DType::kBool},   {ReduceOp::kSum, DType::kF8E4M3},
                                                {ReduceOp::kMax, DType::kF8E5M2}, {ReduceOp::kSum, DType::kI16},
                                                {ReduceOp::kMin, DType::kU16}};
  for (auto [o, d] : refused) {
    Status s = ToNcclOp(o, d, &op);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << DTypeName(d);
    EXPECT_TRUE(Has(s, "reduce op " + std::string(ReduceOpName(o)) + " on dtype " + std::string(DTypeName(d)))) << s;
  }
}

// ---- collectives ------------------------------------------------------------

TEST_F(NcclControl, CollectivesCompleteWhenNcclAndTheStreamAreDone) {
  auto c = Ready();
  g_fake.op = Script::After(2, ncclSuccess);  // NCCL still enqueueing for two polls
  g_fake.stream_busy_polls = 3;
  Status s = c->AllReduce(dev_, dev_, 16, DType::kF32, ReduceOp::kSum);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(g_fake.collectives, 1);
  EXPECT_GE(g_fake.event_queries, 4) << "3 busy, then done";
  EXPECT_TRUE(c->AllGather(dev_, dev_, 4, DType::kBF16).ok());
  EXPECT_TRUE(c->ReduceScatter(dev_, dev_, 4, DType::kF64, ReduceOp::kAvg).ok());
  EXPECT_TRUE(c->Broadcast(dev_, 4, DType::kI64, 0).ok());
  EXPECT_TRUE(c->Barrier().ok());
  EXPECT_EQ(g_fake.collectives, 5);
  EXPECT_EQ(g_fake.aborts, 0);
}

// The aborts the stand-in saw, once `n` arrived (they run on a thread of
// their own) or after 3 s.
int AbortsOnce(int n) {
  const auto start = Clock::now();
  while (g_fake.aborts.load() < n && Clock::now() - start < std::chrono::seconds(3))
    std::this_thread::sleep_for(milliseconds(1));
  return g_fake.aborts.load();
}

// Completes the hanging event `index` (what the GPU would do).
void Finish(int index) {
  std::lock_guard<std::recursive_mutex> lock(testing::g_fake_mu);
  g_fake.events[static_cast<size_t>(index)].never = false;
  g_fake.events[static_cast<size_t>(index)].polls_left = 0;
}

TEST_F(NcclControl, TestReportsNotDoneUntilTheEventFires) {
  auto c = Ready();
  g_fake.stream_busy_polls = INT_MAX;
  std::unique_ptr<Request> r;
  ASSERT_TRUE(c->IAllReduce(dev_, dev_, 8, DType::kI32, ReduceOp::kMax, &r).ok());
  bool done = true;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(r->Test(&done).ok());
    EXPECT_FALSE(done);
  }
  Finish(static_cast<int>(g_fake.events.size()) - 1);
  Status s = r->Test(&done);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(done);
  EXPECT_TRUE(r->Wait().ok());  // again, once done: the same result
}

TEST_F(NcclControl, AllToAllSendsAndReceivesEveryPeerInOneGroup) {
  auto c = Ready(1, 3);
  Status s = c->AllToAll(dev_, dev_, 5, DType::kU8);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(g_fake.group_starts, 1);
  EXPECT_EQ(g_fake.group_ends, 1);
  EXPECT_EQ(g_fake.send_peers, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(g_fake.recv_peers, (std::vector<int>{0, 1, 2}));
}

// Uneven blocks (issue 14, item 11): one rooted call per rank with a block,
// rooted at that rank, at that block's place, in one group.
TEST_F(NcclControl, UnevenAllGatherAndReduceScatterAreRootedCallsPerBlockInOneGroup) {
  auto c = Ready(1, 3);
  char* base = static_cast<char*>(dev_);
  const std::vector<size_t> counts{3, 0, 5};  // f32: blocks at elements 0 and 3
  Status s = c->AllGatherV(base + 12, base, counts, DType::kF32);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(g_fake.rooted.size(), 2u) << "rank 1's empty block makes no call";
  EXPECT_FALSE(g_fake.rooted[0].reduce);
  EXPECT_EQ(g_fake.rooted[0].root, 0);
  EXPECT_EQ(g_fake.rooted[0].count, 3u);
  EXPECT_EQ(g_fake.rooted[0].recv, base);
  EXPECT_EQ(g_fake.rooted[1].root, 2);
  EXPECT_EQ(g_fake.rooted[1].count, 5u);
  EXPECT_EQ(g_fake.rooted[1].recv, base + 12);
  EXPECT_EQ(g_fake.group_starts, 1);
  EXPECT_EQ(g_fake.group_ends, 1);

  g_fake.rooted.clear();
  s = c->ReduceScatterV(base, base + 64, counts, DType::kF32, ReduceOp::kSum);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(g_fake.rooted.size(), 2u);
  EXPECT_TRUE(g_fake.rooted[0].reduce);
  EXPECT_EQ(g_fake.rooted[0].send, base);
  EXPECT_EQ(g_fake.rooted[0].root, 0);
  EXPECT_EQ(g_fake.rooted[1].send, base + 12);
  EXPECT_EQ(g_fake.rooted[1].root, 2);
  EXPECT_EQ(g_fake.rooted[1].count, 5u);
  EXPECT_EQ(g_fake.group_ends, 2);

  s = c->AllGatherV(base, base, {1, 2}, DType::kF32);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_TRUE(Has(s, "all_gather_v: counts has 2 entries for 3 ranks")) << s;
}

// One rank: the data moves as the stand-in moves it (send to recv).
TEST_F(NcclControl, UnevenFormsMoveOneRanksData) {
  g_fake.one_rank_data = true;
  auto c = Ready();
  float in[4] = {1, 2, 3, 4}, out[4] = {0, 0, 0, 0};
  g_fake.pointer_type = cudaMemoryTypeDevice;
  ASSERT_TRUE(c->AllGatherV(in, out, {4}, DType::kF32).ok());
  EXPECT_EQ(out[3], 4.0f);
  float back[4] = {0, 0, 0, 0};
  std::unique_ptr<Request> r;
  ASSERT_TRUE(c->IReduceScatterV(out, back, {4}, DType::kF32, ReduceOp::kSum, &r).ok());
  ASSERT_TRUE(r->Wait().ok());
  EXPECT_EQ(back[2], 3.0f);
}

TEST_F(NcclControl, WaitStopsAtTheDeadlineAndAbortsEveryCommunicator) {
  auto c = Ready();
  g_fake.stream_busy_polls = INT_MAX;  // a kernel waiting for a peer that is gone
  std::unique_ptr<Request> r;
  ASSERT_TRUE(c->IBroadcast(dev_, 3, DType::kF16, 0, &r).ok());
  const auto start = Clock::now();
  Status s = r->Wait();
  const long long ms = Ms(start);
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_TRUE(Has(s, "broadcast(root 0) of 3 f16 (rank 0 of 1) did not complete within op_timeout of 200 ms")) << s;
  EXPECT_TRUE(Has(s, "NCCL communicators aborted")) << s;
  EXPECT_LT(ms, 3000);
  EXPECT_EQ(AbortsOnce(3), 3);  // world, node, leaders
  // Every later call returns the reason, without reaching NCCL.
  const int before = g_fake.collectives;
  Status later = c->AllReduce(dev_, dev_, 1, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(later.code(), Code::kTimeout);
  EXPECT_TRUE(Has(later, "all_reduce(sum) of 1 f32")) << later;
  EXPECT_EQ(g_fake.collectives, before);
  c.reset();
  EXPECT_EQ(g_fake.aborts, 3);  // none twice
  EXPECT_EQ(g_fake.destroys, 0);
}

TEST_F(NcclControl, BlockingCallsHonourTheDeadlineToo) {
  auto c = Ready();
  g_fake.op = Script::Hang();  // NCCL never finishes enqueueing
  const auto start = Clock::now();
  Status s = c->Barrier();
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_TRUE(Has(s, "op_timeout of 200 ms")) << s;
  EXPECT_GE(Ms(start), 200);
  EXPECT_LT(Ms(start), 3000);
  EXPECT_EQ(AbortsOnce(3), 3);
}

// kReturn: the timeout carries the context (the step, the silent ranks)
// and the communicator tells its owner once that it broke.
TEST_F(NcclControl, ATimeoutCarriesTheContextAndTellsOnBreakOnce) {
  NcclOptions o = Fast();
  int breaks = 0;
  o.context = [] { return std::string("at step 7"); };
  o.on_break = [&](const Status&) { ++breaks; };
  auto c = std::make_unique<NcclCommunicator>(FakeNcclApi(), o);
  ASSERT_TRUE(c->SetUpDevice(0).ok());
  ASSERT_TRUE(c->InitWorld(Id(), 0, 1).ok());
  g_fake.stream_busy_polls = INT_MAX;
  Status s = c->AllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_TRUE(Has(s, "op_timeout of 200 ms; at step 7")) << s;
  EXPECT_TRUE(Has(s, "NCCL communicators aborted")) << s;
  EXPECT_EQ(c->AllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kSum).code(), Code::kTimeout);
  c.reset();
  EXPECT_EQ(breaks, 1);
}

// Issue 14, item 1: the deadline does not depend on the caller. Nobody
// waits (the program might be blocked in cudaMemcpy behind the hung
// kernel); the watchdog aborts at the deadline all the same (kReturn).
TEST_F(NcclControl, TheWatchdogKeepsTheDeadlineWithoutAWait) {
  auto c = Ready();
  g_fake.stream_busy_polls = INT_MAX;
  std::unique_ptr<Request> r;
  const auto start = Clock::now();
  ASSERT_TRUE(c->IAllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kSum, &r).ok());
  while (g_fake.aborts.load() == 0 && Ms(start) < 3000) std::this_thread::sleep_for(milliseconds(1));
  const long long ms = Ms(start);
  EXPECT_EQ(AbortsOnce(3), 3) << "world, node and leaders aborted by the watchdog";
  EXPECT_GE(ms, 200);
  EXPECT_LT(ms, 1500) << "op_timeout 200 ms, watched every 10 ms";
  Status s = r->Wait();
  EXPECT_EQ(s.code(), Code::kTimeout) << s;
  EXPECT_TRUE(Has(s, "did not complete within op_timeout of 200 ms")) << s;
}

// kExit: the process ends with 75 at the deadline even though the caller
// is blocked elsewhere, and ncclCommAbort (which may never return, as
// here) is not called first. A guard thread ends the child with 3 after
// 5 s: an abort that hung would show as that.
TEST_F(NcclControl, UnderExitTheWatchdogExits75WithoutAborting) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::thread([] {
          std::this_thread::sleep_for(std::chrono::seconds(5));
          std::_Exit(3);
        }).detach();
        testing::g_abort_hangs = true;
        NcclOptions o = Fast();
        o.on_timeout = OnTimeout::kExit;
        NcclCommunicator c(FakeNcclApi(), o);
        if (!c.SetUpDevice(0).ok() || !c.InitWorld(Id(), 0, 1).ok()) std::_Exit(4);
        g_fake.stream_busy_polls = INT_MAX;
        std::unique_ptr<Request> r;
        if (!c.IAllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kSum, &r).ok()) std::_Exit(5);
        std::this_thread::sleep_for(std::chrono::seconds(10));  // "blocked in cudaMemcpy"
        std::_Exit(6);
      },
      ::testing::ExitedWithCode(75), "did not complete within op_timeout of 200 ms.*exiting with 75");
}

// kReturn with an abort that never returns: the caller gets the Timeout
// within op_timeout + abort_timeout, and the communicator's destruction
// does not wait for the abort either.
// NCCL 2.28 starts a thread per collective on a non-blocking communicator
// and answers ncclInProgress until it has enqueued: the wait for it backs
// off instead of spinning (with the lock held) against that thread.
TEST_F(NcclControl, AnEnqueueInProgressIsWaitedForWithoutSpinning) {
  auto c = Ready();
  g_fake.op_call_result = ncclInProgress;
  g_fake.op = Script::Hang();  // NCCL never finishes enqueueing
  const int before = g_fake.async_polls;
  const auto start = Clock::now();
  Status s = c->AllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(s.code(), Code::kTimeout) << s;
  EXPECT_GE(Ms(start), 200);
  // 200 ms of 1 ms naps after a ramp from 1 us: about 210 polls; a spin
  // makes tens of thousands.
  EXPECT_LE(g_fake.async_polls - before, 400);
}

TEST_F(NcclControl, AnAbortThatNeverReturnsIsLeftBehind) {
  NcclOptions o = Fast();
  o.abort_timeout = milliseconds(100);
  auto c = std::make_unique<NcclCommunicator>(FakeNcclApi(), o);
  ASSERT_TRUE(c->SetUpDevice(0).ok());
  ASSERT_TRUE(c->InitWorld(Id(), 0, 1).ok());
  testing::g_abort_hangs = true;
  g_fake.stream_busy_polls = INT_MAX;
  const auto start = Clock::now();
  Status s = c->AllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(s.code(), Code::kTimeout) << s;
  c.reset();
  EXPECT_LT(Ms(start), 1500) << "op_timeout 200 ms, abort_timeout 100 ms";
  testing::g_abort_hangs = false;  // the abort's thread may end now
  EXPECT_TRUE(Has(s, "did not complete within op_timeout of 200 ms")) << s;
}

// Issue 14, item 2: each collective completes on its own event. Waiting
// for the first does not wait for the second, which hangs.
TEST_F(NcclControl, EachCollectiveCompletesOnItsOwnEvent) {
  auto c = Ready();
  std::unique_ptr<Request> first, second;
  g_fake.stream_busy_polls = 2;
  ASSERT_TRUE(c->IAllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kSum, &first).ok());
  g_fake.stream_busy_polls = INT_MAX;
  ASSERT_TRUE(c->IAllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kSum, &second).ok());
  const auto start = Clock::now();
  Status s = first->Wait();
  EXPECT_TRUE(s.ok()) << "bucket 1 waited for bucket 2: " << s;
  EXPECT_LT(Ms(start), 150);
  bool done = true;
  ASSERT_TRUE(second->Test(&done).ok());
  EXPECT_FALSE(done);
  Finish(static_cast<int>(g_fake.events.size()) - 1);
  EXPECT_TRUE(second->Wait().ok());
}

// Issue 14, item 2: the communicator's stream is non-blocking and follows
// the caller's stream through an event, not the legacy stream's implicit
// order; every collective's event is timing-free.
TEST_F(NcclControl, TheStreamIsNonBlockingAndFollowsTheCallersStream) {
  NcclOptions o = Fast();
  cudaStream_t callers = nullptr;
  ASSERT_EQ(FakeNcclApi().StreamCreateWithFlags(&callers, 0), cudaSuccess);  // stream 0: the program's
  o.stream = callers;
  NcclCommunicator c(FakeNcclApi(), o);
  ASSERT_TRUE(c.SetUpDevice(0).ok());
  ASSERT_TRUE(c.InitWorld(Id(), 0, 1).ok());
  ASSERT_EQ(g_fake.stream_flags.size(), 2u);
  EXPECT_EQ(g_fake.stream_flags[1], static_cast<unsigned>(cudaStreamNonBlocking));
  ASSERT_TRUE(c.AllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kSum).ok());
  ASSERT_TRUE(c.Broadcast(dev_, 4, DType::kF32, 0).ok());
  // Per collective: the ready event (event 0) recorded on the program's
  // stream, and the communicator's stream (1) waiting for it.
  ASSERT_EQ(g_fake.stream_waits.size(), 2u);
  for (const auto& w : g_fake.stream_waits) {
    EXPECT_EQ(w.stream, 1);
    EXPECT_EQ(w.event, 0);
  }
  EXPECT_EQ(g_fake.event_streams[0], 0) << "the ready event goes on the program's stream";
  for (unsigned flags : g_fake.event_flags) EXPECT_EQ(flags, static_cast<unsigned>(cudaEventDisableTiming));
  EXPECT_EQ(g_fake.event_streams.back(), 1) << "a collective's event goes on the communicator's stream";
}

// Issue 14, item 2: the caller's stream can wait for a collective on the
// device instead of the host; its deadline stays the watchdog's, and the
// Request no longer blocks its destruction.
TEST_F(NcclControl, ACallersStreamCanWaitInsteadOfTheHost) {
  auto c = Ready();
  cudaStream_t callers = nullptr;
  ASSERT_EQ(FakeNcclApi().StreamCreateWithFlags(&callers, 0), cudaSuccess);
  g_fake.stream_busy_polls = INT_MAX;
  std::unique_ptr<Request> r;
  ASSERT_TRUE(c->IAllGather(dev_, dev_, 4, DType::kF32, &r).ok());
  const int op_event = static_cast<int>(g_fake.events.size()) - 1;
  ASSERT_TRUE(r->WaitOnStream(callers).ok());
  ASSERT_FALSE(g_fake.stream_waits.empty());
  EXPECT_EQ(g_fake.stream_waits.back().stream, 1);  // the program's (stream 0 is the communicator's)
  EXPECT_EQ(g_fake.stream_waits.back().event, op_event);
  const auto start = Clock::now();
  r.reset();
  EXPECT_LT(Ms(start), 50) << "a Request handed to a stream is not waited for by the host";
  EXPECT_EQ(AbortsOnce(3), 3) << "the watchdog still keeps the deadline";
}

// Issue 14, item 4: the device the program already uses is respected, an
// explicit one wins, and otherwise local rank modulo the devices.
TEST_F(NcclControl, TheDeviceFollowsTheProgramUnlessAsked) {
  g_fake.device_count = 2;
  int device = -1;
  ASSERT_EQ(testing::fake::SetDevice(1), cudaSuccess);
  g_fake.primary_context_active = true;  // the program used device 1
  ASSERT_TRUE(ChooseDevice(FakeNcclApi(), -1, 0, &device).ok());
  EXPECT_EQ(device, 1);
  ASSERT_TRUE(ChooseDevice(FakeNcclApi(), 0, 0, &device).ok());
  EXPECT_EQ(device, 0) << "an explicit device wins";
  g_fake.primary_context_active = false;  // the program never touched CUDA
  ASSERT_TRUE(ChooseDevice(FakeNcclApi(), -1, 3, &device).ok());
  EXPECT_EQ(device, 1) << "local rank 3 of 2 devices";
  Status s = ChooseDevice(FakeNcclApi(), 2, 0, &device);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
}

// Issue 31, item 6: a program that never chose a device gets the one the
// fallback chose (local rank modulo the devices) as its current device, so
// that it allocates where the collectives run; NCCL's init and every
// buffer query run on it.
TEST_F(NcclControl, TheFallbackDeviceBecomesTheProgramsCurrentDevice) {
  g_fake.device_count = 2;
  g_fake.primary_context_active = false;  // the program never touched CUDA
  auto c = std::make_unique<NcclCommunicator>(FakeNcclApi(), Fast());
  ASSERT_TRUE(c->SetUpDevice(3).ok());
  EXPECT_EQ(c->device(), 1);
  EXPECT_EQ(testing::fake::t_current_device, 1) << "was put back to 0";
  ASSERT_TRUE(c->InitWorld(Id(), 0, 1).ok());
  EXPECT_EQ(g_fake.init_device, 1);
  // The program allocates on its current device: device 1's memory.
  g_fake.pointer_device = 1;
  EXPECT_TRUE(c->AllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kSum).ok());
}

// Issue 14, item 4: every call puts the caller's device back; a buffer on
// another device is refused with a Status, not a fault. Issue 31, item 6:
// the buffer query runs on the communicator's device (elsewhere CUDA would
// make a context on the caller's).
TEST_F(NcclControl, TheCallersDeviceIsRestoredAndAnotherDevicesBufferRefused) {
  g_fake.device_count = 2;
  NcclOptions o = Fast();
  o.device = 1;
  ASSERT_EQ(testing::fake::SetDevice(0), cudaSuccess);
  auto c = std::make_unique<NcclCommunicator>(FakeNcclApi(), o);
  ASSERT_TRUE(c->SetUpDevice(0).ok());
  EXPECT_EQ(testing::fake::t_current_device, 1) << "the chosen device is current after SetUpDevice";
  ASSERT_EQ(testing::fake::SetDevice(0), cudaSuccess);  // the program goes back to its own
  ASSERT_TRUE(c->InitWorld(Id(), 0, 1).ok());
  EXPECT_EQ(g_fake.init_device, 1);
  EXPECT_EQ(testing::fake::t_current_device, 0) << "after InitWorld";
  g_fake.pointer_device = 1;
  ASSERT_TRUE(c->AllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kSum).ok());
  EXPECT_EQ(testing::fake::t_current_device, 0) << "after a collective";
  ASSERT_FALSE(g_fake.pointer_query_devices.empty());
  for (int d : g_fake.pointer_query_devices) EXPECT_EQ(d, 1) << "a buffer query on the caller's device";
  g_fake.pointer_device = 0;
  Status s = c->AllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_TRUE(Has(s, "is on CUDA device 0, the communicator's is 1")) << s;
  EXPECT_EQ(testing::fake::t_current_device, 0) << "after a refused collective";
  c.reset();
  EXPECT_EQ(testing::fake::t_current_device, 0) << "after destruction";
}

// A detected death ends as an undetected one would (at the deadline):
// exit 75 under kExit, so that the job is requeued instead of failing with
// an IOError, and at the failed collective's deadline, as the MPI path
// does (mpi::ExitForRequeueAt), not at once. Each case in a child process
// (gtest's death tests).
class NcclDetectedDeath : public NcclControl {
 protected:
  static NcclOptions Exit() {
    NcclOptions o = Fast();
    o.on_timeout = OnTimeout::kExit;
    o.op_timeout = std::chrono::milliseconds(1000);
    // Says how far the exit's time is; the default end then waits for it
    // and exits (the expected output: kWaited, then the reason).
    o.exit_for_requeue = [](const Status&, Clock::time_point at) {
      std::fprintf(stderr, "exit asked %lld ms before its time\n",
                   static_cast<long long>(std::chrono::duration_cast<milliseconds>(at - Clock::now()).count()));
    };
    return o;
  }
  // At least 300 ms of the 1 s deadline left when the death was seen.
  static constexpr const char* kWaited = "exit asked ([3-9][0-9][0-9]|1000) ms before its time.*";
  // Ends the child with 3 if nothing exited within 5 s.
  static void Bound() {
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::seconds(5));
      std::_Exit(3);
    }).detach();
  }
  void SetUp() override {
    NcclControl::SetUp();
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

TEST_F(NcclDetectedDeath, AnAsynchronousErrorExits75UnderExit) {
  EXPECT_EXIT(
      {
        Bound();
        NcclCommunicator c(FakeNcclApi(), Exit());
        if (!c.SetUpDevice(0).ok() || !c.InitWorld(Id(), 0, 1).ok()) std::_Exit(4);
        g_fake.stream_busy_polls = INT_MAX;
        std::unique_ptr<Request> r;
        if (!c.IAllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kSum, &r).ok()) std::_Exit(5);
        {
          std::lock_guard<std::recursive_mutex> lock(testing::g_fake_mu);
          g_fake.comms.front().script = Script::After(0, ncclRemoteError);
          g_fake.comms.front().polls = 0;
        }
        (void)r->Wait();
        std::_Exit(6);
      },
      ::testing::ExitedWithCode(75), std::string(kWaited) + "fake remote error.*exiting with 75");
}

TEST_F(NcclDetectedDeath, AStickyCudaErrorExits75UnderExit) {
  EXPECT_EXIT(
      {
        Bound();
        NcclCommunicator c(FakeNcclApi(), Exit());
        if (!c.SetUpDevice(0).ok() || !c.InitWorld(Id(), 0, 1).ok()) std::_Exit(4);
        std::unique_ptr<Request> r;
        if (!c.IAllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kSum, &r).ok()) std::_Exit(5);
        g_fake.event_query_error = cudaErrorECCUncorrectable;
        (void)r->Wait();
        std::_Exit(6);
      },
      ::testing::ExitedWithCode(75), std::string(kWaited) + "cudaEventQuery failed with 214.*exiting with 75");
}

TEST_F(NcclDetectedDeath, AnAsynchronousErrorFromAThreadExits75WhileIdle) {
  EXPECT_EXIT(
      {
        Bound();
        NcclCommunicator c(FakeNcclApi(), Exit());
        if (!c.SetUpDevice(0).ok() || !c.InitWorld(Id(), 0, 1).ok()) std::_Exit(4);
        if (!c.AllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kSum).ok()) std::_Exit(5);
        testing::InjectAsyncError(c.world_comm(), ncclSystemError, milliseconds(10));
        std::this_thread::sleep_for(std::chrono::seconds(10));  // no call: only the watchdog can see it
        std::_Exit(6);
      },
      ::testing::ExitedWithCode(75), std::string(kWaited) + "fake system error.*exiting with 75");
}

TEST_F(NcclDetectedDeath, AFailedEnqueueExits75UnderExit) {
  EXPECT_EXIT(
      {
        Bound();
        NcclCommunicator c(FakeNcclApi(), Exit());
        if (!c.SetUpDevice(0).ok() || !c.InitWorld(Id(), 0, 1).ok()) std::_Exit(4);
        // The call fails and the communicator's state says why: a peer died.
        g_fake.op_call_result = ncclRemoteError;
        g_fake.op = Script::After(0, ncclRemoteError);
        (void)c.AllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kSum);
        std::_Exit(6);
      },
      ::testing::ExitedWithCode(75), std::string(kWaited) + "ncclAllReduce failed with 6.*exiting with 75");
}

// While a detected death waits for its exit (kExit), the communicator is
// dead: another thread's collective must not enqueue on it, nor its Test
// query CUDA, and neither may return an error the program could end with
// another code than 75. Each joins the death's exit, at the death's time.
// The exit hook ends the child with 7 if NCCL was asked for a collective
// after the death, 8 if the event was queried after it.
class NcclDetectedDeathWait : public NcclDetectedDeath {
 protected:
  static inline std::atomic<int> collectives_at_death{-1}, queries_at_death{-1};
  static NcclOptions Watched() {
    NcclOptions o = Exit();
    o.exit_for_requeue = [](const Status& why, Clock::time_point at) {
      std::lock_guard<std::recursive_mutex> lock(testing::g_fake_mu);
      const int collectives = g_fake.collectives, queries = g_fake.event_queries.load();
      int expected = -1;
      if (collectives_at_death.compare_exchange_strong(expected, collectives)) queries_at_death = queries;
      std::fprintf(stderr, "exit asked %lld ms before its time: %s\n",
                   static_cast<long long>(std::chrono::duration_cast<milliseconds>(at - Clock::now()).count()),
                   why.ToString().c_str());
      if (collectives != collectives_at_death) {
        std::fprintf(stderr, "a collective was enqueued on the dead communicator\n");
        std::_Exit(7);
      }
      if (queries != queries_at_death) {
        std::fprintf(stderr, "an event was queried after the death\n");
        std::_Exit(8);
      }
    };
    return o;
  }
  // A collective that hangs, then a peer's death, which the watchdog sees
  // and waits out (about 900 ms of the 1 s deadline left).
  static void DeathWhileWaiting(NcclCommunicator& c, std::unique_ptr<Request>* r) {
    if (!c.SetUpDevice(0).ok() || !c.InitWorld(Id(), 0, 1).ok()) std::_Exit(4);
    g_fake.stream_busy_polls = INT_MAX;
    if (!c.IAllReduce(reinterpret_cast<void*>(0x1000), reinterpret_cast<void*>(0x1000), 4, DType::kF32,
                      ReduceOp::kSum, r).ok())
      std::_Exit(5);
    testing::InjectAsyncError(c.world_comm(), ncclRemoteError, milliseconds(10));
    for (int i = 0; i < 300 && collectives_at_death < 0; ++i) std::this_thread::sleep_for(milliseconds(1));
    if (collectives_at_death < 0) std::_Exit(9);  // the watchdog did not see it
  }
};

TEST_F(NcclDetectedDeathWait, ALaterCollectiveIsNotEnqueuedAndExits75AtTheDeathsTime) {
  EXPECT_EXIT(
      {
        Bound();
        NcclCommunicator c(FakeNcclApi(), Watched());
        std::unique_ptr<Request> r;
        DeathWhileWaiting(c, &r);
        g_fake.stream_busy_polls = 0;
        (void)c.AllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kSum);
        std::_Exit(6);  // returned
      },
      ::testing::ExitedWithCode(75),
      "exit asked ([6-9][0-9][0-9]) ms before its time: .*fake remote error.*"
      "exit asked ([6-9][0-9][0-9]) ms before its time: .*fake remote error.*exiting with 75");
}

TEST_F(NcclDetectedDeathWait, TestingACollectiveQueriesNothingAndExits75) {
  EXPECT_EXIT(
      {
        Bound();
        NcclCommunicator c(FakeNcclApi(), Watched());
        std::unique_ptr<Request> r;
        DeathWhileWaiting(c, &r);
        bool done = false;
        (void)r->Test(&done);
        std::_Exit(6);  // returned
      },
      ::testing::ExitedWithCode(75),
      "exit asked ([6-9][0-9][0-9]) ms before its time: .*fake remote error.*"
      "exit asked ([6-9][0-9][0-9]) ms before its time: .*fake remote error.*exiting with 75");
}

TEST_F(NcclControl, AnAsynchronousErrorAbortsAndIsReported) {
  auto c = Ready();
  g_fake.stream_busy_polls = INT_MAX;
  std::unique_ptr<Request> r;
  ASSERT_TRUE(c->IAllGather(dev_, dev_, 2, DType::kI64, &r).ok());
  // The error arrives while the collective runs; the watchdog sees it.
  {
    std::lock_guard<std::recursive_mutex> lock(testing::g_fake_mu);
    g_fake.comms.front().script = Script::After(2, ncclRemoteError);
    g_fake.comms.front().polls = 0;
  }
  const auto start = Clock::now();
  Status s = r->Wait();
  EXPECT_EQ(s.code(), Code::kIOError);
  EXPECT_TRUE(Has(s, "all_gather of 2 i64 (rank 0 of 1)")) << s;
  EXPECT_TRUE(Has(s, "failed: NCCL reported 6 (fake remote error): fake detail")) << s;
  EXPECT_LT(Ms(start), 150) << "at once, not at the deadline";
  r.reset();
  c.reset();  // joins the watchdog, which aborted them
  EXPECT_EQ(g_fake.aborts, 3);
}

// ---- the stand-in behaves as NCCL's non-blocking mode ---------------------

// Every collective returns ncclInProgress with a group job; the
// communicator takes no other call until ncclCommGetAsyncError freed it.
TEST_F(NcclControl, StandInCollectivesAreInProgressUntilGetAsyncErrorFreesTheirJob) {
  const NcclApi& api = FakeNcclApi();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ASSERT_EQ(api.CommInitRankConfig(&comm, 1, Id(), 0, &config), ncclInProgress);
  ASSERT_NE(comm, nullptr);  // the handle at once, the init on a thread
  ncclResult_t state = ncclSuccess;
  ASSERT_EQ(api.CommGetAsyncError(comm, &state), ncclSuccess);
  EXPECT_EQ(state, ncclSuccess);  // the init's job joined and freed
  g_fake.op = Script::After(1, ncclSuccess);
  EXPECT_EQ(api.AllReduce(dev_, dev_, 4, ncclFloat32, ncclSum, comm, nullptr), ncclInProgress);
  // Used again before its job was freed: refused, as NCCL's ncclCommEnsureReady.
  EXPECT_EQ(api.AllReduce(dev_, dev_, 4, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(g_fake.used_while_in_progress, 1);
  ASSERT_EQ(api.CommGetAsyncError(comm, &state), ncclSuccess);
  EXPECT_EQ(state, ncclInProgress);
  ASSERT_EQ(api.CommGetAsyncError(comm, &state), ncclSuccess);
  EXPECT_EQ(state, ncclSuccess);
  EXPECT_FALSE(g_fake.comms.front().job_pending);
  // A group: its collectives join it, ncclGroupEnd launches one job.
  ASSERT_EQ(api.GroupStart(), ncclSuccess);
  EXPECT_EQ(api.Broadcast(dev_, dev_, 4, ncclFloat32, 0, comm, nullptr), ncclSuccess);
  EXPECT_EQ(api.GroupEnd(), ncclInProgress);
  EXPECT_TRUE(g_fake.comms.front().job_pending);
  ASSERT_EQ(api.CommGetAsyncError(comm, &state), ncclSuccess);
  ASSERT_EQ(api.CommGetAsyncError(comm, &state), ncclSuccess);
  EXPECT_EQ(state, ncclSuccess);
  // A job that fails leaves its error in the communicator for good.
  g_fake.op = Script::After(0, ncclSystemError);
  EXPECT_EQ(api.AllGather(dev_, dev_, 4, ncclFloat32, comm, nullptr), ncclInProgress);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(api.CommGetAsyncError(comm, &state), ncclSuccess);
    EXPECT_EQ(state, ncclSystemError);
  }
  EXPECT_EQ(g_fake.double_frees, 0);
  (void)api.CommAbort(comm);
}

// The backend finishes every job before the next call and records each
// collective's event only once NCCL launched it.
TEST_F(NcclControl, EveryCollectiveJobIsFinishedBeforeTheNextCall) {
  auto c = Ready(0, 2);
  g_fake.op = Script::After(3, ncclSuccess);
  g_fake.stream_busy_polls = 2;
  EXPECT_TRUE(c->AllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kSum).ok());
  EXPECT_TRUE(c->AllGatherV(dev_, dev_, {2, 3}, DType::kF32).ok());
  EXPECT_TRUE(c->ReduceScatterV(dev_, dev_, {2, 3}, DType::kF32, ReduceOp::kSum).ok());
  EXPECT_TRUE(c->AllToAll(dev_, dev_, 2, DType::kF32).ok());
  EXPECT_TRUE(c->Barrier().ok());
  EXPECT_EQ(g_fake.used_while_in_progress, 0);
  EXPECT_EQ(g_fake.events_before_launch, 0);
  EXPECT_EQ(g_fake.double_frees, 0);
  EXPECT_FALSE(testing::FakeNccl::Of(c->world_comm()).job_pending);
  c.reset();
  EXPECT_EQ(g_fake.used_while_in_progress, 0);  // finalize and destroy after each job was freed
  EXPECT_EQ(g_fake.destroys, 3);
}

// An asynchronous error that a thread of NCCL's sets while the program
// does nothing with the communicator (a peer died between two steps):
// the watchdog finds it and breaks the communicator (kReturn), without a
// collective in flight.
TEST_F(NcclControl, AnAsynchronousErrorFromAThreadBreaksAnIdleCommunicator) {
  auto c = Ready();
  ASSERT_TRUE(c->AllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kSum).ok());
  testing::InjectAsyncError(c->world_comm(), ncclRemoteError, milliseconds(20));
  const auto start = Clock::now();
  while (c->world_comm() != nullptr && Ms(start) < 5000) std::this_thread::sleep_for(milliseconds(1));
  EXPECT_EQ(c->world_comm(), nullptr) << "the watchdog did not see the error";
  Status s = c->AllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(s.code(), Code::kIOError) << s;
  EXPECT_TRUE(Has(s, "NCCL reported 6 (fake remote error)")) << s;
  c.reset();
  EXPECT_EQ(g_fake.aborts, 3);
}

TEST_F(NcclControl, ARefusedCallLeavesTheCommunicatorUsable) {
  auto c = Ready();
  g_fake.op_call_result = ncclInvalidArgument;
  Status s = c->AllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kMin);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_TRUE(Has(s, "ncclAllReduce failed with 4")) << s;
  EXPECT_EQ(g_fake.aborts, 0);
  g_fake.op_call_result = ncclSuccess;
  EXPECT_TRUE(c->AllReduce(dev_, dev_, 4, DType::kF32, ReduceOp::kMin).ok());
}

TEST_F(NcclControl, BadArgumentsAreRefusedBeforeNccl) {
  auto c = Ready(0, 2);
  Status s = c->AllReduce(dev_, dev_, 4, DType::kI32, ReduceOp::kAvg);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  s = c->Broadcast(dev_, 4, DType::kF32, 2);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_TRUE(Has(s, "root 2 is not a rank of 2")) << s;
  s = c->AllGather(nullptr, dev_, 4, DType::kF32);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_TRUE(Has(s, "send buffer is null")) << s;
  s = c->AllToAll(dev_, dev_, SIZE_MAX / 4, DType::kF64);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_TRUE(Has(s, "overflows")) << s;
  g_fake.pointer_type = cudaMemoryTypeUnregistered;
  s = c->ReduceScatter(dev_, dev_, 4, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_TRUE(Has(s, "is host memory unknown to CUDA; the nccl backend takes device buffers")) << s;
  // CUDA before 11 answers an error for host memory it does not know: the
  // same refusal (the one buffer check of both backends, LocateBuffer).
  g_fake.pointer_query_error = cudaErrorInvalidValue;
  s = c->AllGather(dev_, dev_, 4, DType::kF32);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_TRUE(Has(s, "is host memory unknown to CUDA")) << s;
  g_fake.pointer_query_error = cudaSuccess;
  EXPECT_EQ(g_fake.collectives, 0);
  // Zero elements touch nothing: null buffers are fine.
  EXPECT_TRUE(c->AllReduce(nullptr, nullptr, 0, DType::kF32, ReduceOp::kSum).ok());
  EXPECT_EQ(g_fake.aborts, 0);
}

TEST_F(NcclControl, AnUnfinishedRequestIsWaitedForWhenDestroyed) {
  auto c = Ready();
  g_fake.stream_busy_polls = 5;
  std::unique_ptr<Request> r;
  ASSERT_TRUE(c->IReduceScatter(dev_, dev_, 1, DType::kF32, ReduceOp::kSum, &r).ok());
  r.reset();
  EXPECT_EQ(g_fake.events.back().polls_left, 0) << "its event was waited for";
  EXPECT_EQ(g_fake.aborts, 0);
}

// The destructor finalizes with the watchdog stopped: its wait is bounded
// by finalize_timeout (not op_timeout, 600 s by default), and a failure
// is written out, not swallowed.
TEST_F(NcclControl, ATeardownThatHangsIsBoundedAndReported) {
  NcclOptions o = Fast();
  o.op_timeout = std::chrono::seconds(20);
  o.finalize_timeout = milliseconds(200);
  o.abort_timeout = milliseconds(500);
  auto c = std::make_unique<NcclCommunicator>(FakeNcclApi(), o);
  ASSERT_TRUE(c->SetUpDevice(0).ok());
  ASSERT_TRUE(c->InitWorld(Id(), 0, 1).ok());
  {
    std::lock_guard<std::recursive_mutex> lock(testing::g_fake_mu);
    g_fake.comms.front().script = Script::Hang();  // ncclCommFinalize never ends
    g_fake.comms.front().polls = 0;
  }
  ::testing::internal::CaptureStderr();
  const auto start = Clock::now();
  c.reset();
  const long long ms = Ms(start);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_LT(ms, 3000) << "finalize_timeout 200 ms, abort_timeout 500 ms";
  EXPECT_NE(err.find("ncclCommFinalize did not finish within finalize_timeout of 200 ms"), std::string::npos) << err;
  EXPECT_NE(err.find("destroying the communicator"), std::string::npos) << err;
  EXPECT_EQ(g_fake.finalizes, 1);
  EXPECT_EQ(g_fake.aborts, 1);
}

TEST_F(NcclControl, AHealthyCommunicatorIsFinalizedAndDestroyedNotAborted) {
  auto c = Ready();
  c.reset();
  EXPECT_EQ(g_fake.finalizes, 3);
  EXPECT_EQ(g_fake.destroys, 3);
  EXPECT_EQ(g_fake.aborts, 0);
}

TEST_F(NcclControl, ARequestOutlivesItsCommunicator) {
  auto c = Ready();
  g_fake.stream_busy_polls = 2;
  std::unique_ptr<Request> r;
  ASSERT_TRUE(c->IAllToAll(dev_, dev_, 1, DType::kF32, &r).ok());
  c.reset();  // the NCCL state stays with the request
  EXPECT_EQ(g_fake.finalizes, 0);
  EXPECT_TRUE(r->Wait().ok());
  r.reset();  // now it goes, finalized
  EXPECT_EQ(g_fake.finalizes, 3);
  EXPECT_EQ(g_fake.aborts, 0);
}

}  // namespace
}  // namespace baton::nccl
