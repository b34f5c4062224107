// Multi-rank tests of the nccl backend's MPI bootstrap: the unique-id
// exchange with the real NCCL (which needs no GPU), and the agreement
// across ranks: one rank's failure (no device, no id, an init or split
// that fails or hangs) fails every rank, each with a Status that says
// which rank failed and why. The NCCL side is the stand-in of
// tests/lib/fake_nccl_api.h, scripted per rank (each rank is a process).
// Run at 2 and 3 ranks by make check.
#include <mpi.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "baton/runtime.h"
#include "mpi_runtime/mpi/mpi_communicator.h"
#include "mpi_runtime/nccl/buffer_location.h"
#include "mpi_runtime/nccl/nccl_bootstrap.h"
#include "mpi_runtime/nccl/nccl_communicator.h"
#include "tests/lib/fake_nccl_api.h"

namespace baton::nccl {
namespace {

using testing::FakeNcclApi;
using testing::g_fake;
using testing::Script;
using Clock = std::chrono::steady_clock;

int Rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int Size() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}
bool Has(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

NcclPlacement Here() {
  NcclPlacement p;
  p.rank = Rank();
  p.size = Size();
  p.local_rank = Rank();  // one node under mpirun here
  p.node = 0;
  p.leader = Rank() == 0;
  return p;
}

NcclOptions Fast() {
  NcclOptions o;
  o.init_timeout = std::chrono::milliseconds(200);
  o.op_timeout = std::chrono::milliseconds(200);
  return o;
}

// The real NCCL and CUDA runtime, loaded as the backend loads them (this
// machine has both, without a GPU).
const NcclApi& Real() {
  const NcclApi* api = nullptr;
  Status s = RealNcclApi(&api);
  if (!s.ok()) {
    ADD_FAILURE() << s;
    static const NcclApi none{};
    return none;
  }
  return *api;
}

class NcclBootstrap : public ::testing::Test {
 protected:
  void SetUp() override { testing::Reset(); }
};

TEST_F(NcclBootstrap, EveryRankGetsRankZerosUniqueIdByteForByte) {
  ncclUniqueId id;
  std::memset(&id, 0xee, sizeof id);
  Status s = ExchangeUniqueId(Real(), MPI_COMM_WORLD, &id, std::chrono::seconds(60));
  EXPECT_TRUE(s.ok()) << s;
  // Every rank's copy, side by side on every rank.
  std::vector<ncclUniqueId> all(Size());
  ASSERT_EQ(MPI_Allgather(&id, sizeof id, MPI_BYTE, all.data(), sizeof id, MPI_BYTE, MPI_COMM_WORLD),
            MPI_SUCCESS);
  for (int r = 0; r < Size(); ++r)
    EXPECT_EQ(std::memcmp(&all[r], &all[0], sizeof id), 0) << "rank " << r << "'s id differs from rank 0's";
  // A real id: not the zeros of a failed call, nor the pattern it started as.
  const ncclUniqueId zeros{};
  EXPECT_NE(std::memcmp(&all[0], &zeros, sizeof id), 0);
  std::vector<char> pattern(sizeof id, static_cast<char>(0xee));
  EXPECT_NE(std::memcmp(&all[0], pattern.data(), sizeof id), 0);
}

TEST_F(NcclBootstrap, AFailedUniqueIdReachesEveryRank) {
  if (Rank() == 0) g_fake.unique_id_result = ncclSystemError;
  std::unique_ptr<NcclCommunicator> comm;
  Status s = BootstrapNccl(MPI_COMM_WORLD, Here(), Fast(), FakeNcclApi(), &comm);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(comm, nullptr);
  EXPECT_EQ(g_fake.init_calls, 0);  // nobody went on to create a communicator
  if (Rank() == 0) {
    EXPECT_TRUE(Has(s, "ncclGetUniqueId failed with 2")) << s;
  } else {
    EXPECT_EQ(s.code(), Code::kAborted);
    EXPECT_TRUE(Has(s, "rank 0 failed making the NCCL unique id")) << s;
    EXPECT_TRUE(Has(s, "ncclGetUniqueId failed with 2")) << s;  // rank 0's message travelled
  }
}

TEST_F(NcclBootstrap, AgreementNamesTheLowestFailedRankAndItsMessage) {
  const int bad = Size() - 1;
  Status local = Rank() == bad ? Status::IOError("runtime", "disk on fire") : Status::OK();
  Status s = AgreeOnSuccess(MPI_COMM_WORLD, local, "testing", std::chrono::seconds(60));
  EXPECT_FALSE(s.ok());
  if (Rank() == bad) {
    EXPECT_EQ(s.code(), Code::kIOError);
    EXPECT_EQ(s.message(), "disk on fire");
  } else {
    EXPECT_EQ(s.code(), Code::kAborted);
    EXPECT_TRUE(Has(s, "rank " + std::to_string(bad) + " failed testing, so this rank stops too")) << s;
    EXPECT_TRUE(Has(s, "disk on fire")) << s;
  }
  EXPECT_TRUE(AgreeOnSuccess(MPI_COMM_WORLD, Status::OK(), "testing", std::chrono::seconds(60)).ok());
}

TEST_F(NcclBootstrap, EveryRankSucceedsTogether) {
  std::unique_ptr<NcclCommunicator> comm;
  Status s = BootstrapNccl(MPI_COMM_WORLD, Here(), Fast(), FakeNcclApi(), &comm);
  ASSERT_TRUE(s.ok()) << s;  // no collective follows
  EXPECT_EQ(comm->rank(), Rank());
  EXPECT_EQ(comm->size(), Size());
  EXPECT_EQ(comm->backend(), Backend::kNccl);
  EXPECT_NE(comm->world_comm(), nullptr);
  EXPECT_EQ(g_fake.init_calls, 1);
  // Issue 14, item 3: no node or leaders communicator until one is asked
  // for (no collective uses them; each costs buffers, proxy threads and an
  // init that can fail). The bootstrap made both before.
  EXPECT_EQ(g_fake.split_calls, 0);
  EXPECT_EQ(comm->node_comm(), nullptr);
  EXPECT_EQ(comm->leaders_comm(), nullptr);
  EXPECT_EQ(g_fake.aborts, 0);
  comm.reset();
  EXPECT_EQ(g_fake.aborts, 0);
  EXPECT_EQ(g_fake.destroys, 1);
}

TEST_F(NcclBootstrap, OneRanksInitFailureFailsEveryRank) {
  const int bad = Size() - 1;
  if (Rank() == bad) g_fake.init_call_result = ncclSystemError;
  std::unique_ptr<NcclCommunicator> comm;
  Status s = BootstrapNccl(MPI_COMM_WORLD, Here(), Fast(), FakeNcclApi(), &comm);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(comm, nullptr);
  EXPECT_EQ(g_fake.split_calls, 0);
  if (Rank() == bad) {
    EXPECT_EQ(s.code(), Code::kIOError);
    EXPECT_TRUE(Has(s, "ncclCommInitRankConfig failed with 2 (fake system error)")) << s;
    EXPECT_EQ(g_fake.aborts, 0);  // it made no communicator
  } else {
    EXPECT_EQ(s.code(), Code::kAborted);
    EXPECT_TRUE(Has(s, "rank " + std::to_string(bad) + " failed creating the NCCL world communicator")) << s;
    EXPECT_TRUE(Has(s, "fake system error")) << s;
    EXPECT_EQ(g_fake.aborts, 1);  // its world communicator, which it had made
  }
}

TEST_F(NcclBootstrap, OneRanksHangingInitTimesOutAndFailsEveryRank) {
  if (Rank() == 0) g_fake.init = Script::Hang();
  const auto start = Clock::now();
  std::unique_ptr<NcclCommunicator> comm;
  Status s = BootstrapNccl(MPI_COMM_WORLD, Here(), Fast(), FakeNcclApi(), &comm);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  EXPECT_FALSE(s.ok());
  EXPECT_LT(ms, 5000);
  EXPECT_EQ(g_fake.aborts, 1);  // every rank aborts its world communicator
  if (Rank() == 0) {
    EXPECT_EQ(s.code(), Code::kTimeout);
    EXPECT_TRUE(Has(s, "init_timeout of 200 ms")) << s;
    EXPECT_GE(ms, 200);
  } else {
    EXPECT_EQ(s.code(), Code::kAborted);
    EXPECT_TRUE(Has(s, "rank 0 failed creating the NCCL world communicator")) << s;
    EXPECT_TRUE(Has(s, "init_timeout of 200 ms")) << s;
  }
}

TEST_F(NcclBootstrap, ARankWithoutADeviceFailsEveryRankBeforeNccl) {
  const int bad = Size() - 1;
  if (Rank() == bad) g_fake.device_count_error = cudaErrorNoDevice;
  std::unique_ptr<NcclCommunicator> comm;
  Status s = BootstrapNccl(MPI_COMM_WORLD, Here(), Fast(), FakeNcclApi(), &comm);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(g_fake.init_calls, 0);
  if (Rank() == bad) {
    EXPECT_EQ(s.code(), Code::kUnavailable);
    EXPECT_TRUE(Has(s, "no CUDA device visible: cudaGetDeviceCount failed")) << s;
  } else {
    EXPECT_EQ(s.code(), Code::kAborted);
    EXPECT_TRUE(Has(s, "failed setting up its CUDA device")) << s;
    EXPECT_TRUE(Has(s, "no CUDA device visible")) << s;
  }
}

TEST_F(NcclBootstrap, WithoutAGpuTheRealBackendIsUnavailableNotACrash) {
  if (NcclDeviceVisible(Real())) GTEST_SKIP() << "a GPU is visible here";
  std::unique_ptr<NcclCommunicator> comm;
  Status s = BootstrapNccl(MPI_COMM_WORLD, Here(), NcclOptions{}, Real(), &comm);
  EXPECT_EQ(s.code(), Code::kUnavailable) << s;
  EXPECT_TRUE(Has(s, "no CUDA device visible: cudaGetDeviceCount failed with")) << s;
  EXPECT_EQ(comm, nullptr);
}

// Issue 14, item 9: the bootstrap's MPI calls are under a deadline. The
// last rank comes after the others' deadline (on a communicator of the
// test's own, so that the late call completes the abandoned one); the
// others get a Timeout naming the step instead of waiting for it.
TEST_F(NcclBootstrap, ARankThatDoesNotComeIsATimeoutNotAHang) {
  if (Size() < 2) GTEST_SKIP() << "needs a second rank to be late";
  MPI_Comm dup;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &dup), MPI_SUCCESS);
  if (Rank() == Size() - 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    EXPECT_TRUE(AgreeOnSuccess(dup, Status::OK(), "late", std::chrono::seconds(60)).ok());
  } else {
    const auto t0 = Clock::now();
    Status s = AgreeOnSuccess(dup, Status::OK(), "creating the NCCL world communicator", std::chrono::milliseconds(200));
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    EXPECT_EQ(s.code(), Code::kTimeout) << s;
    EXPECT_TRUE(Has(s, "agreeing on creating the NCCL world communicator (MPI_Iallreduce) did not finish within "
                       "200 ms (a rank did not come)"))
        << s;
    EXPECT_LT(took, 700) << "the deadline was 200 ms";
  }
  MPI_Barrier(MPI_COMM_WORLD);  // the late rank's call completed the others' abandoned one
}

// Issue 31, item 6: CommOptions::nccl.device reaches NCCL: the init runs
// on it and it is the program's current device afterwards; the public
// Communicator::device() says so.
TEST_F(NcclBootstrap, TheRequestedDeviceReachesNccl) {
  std::unique_ptr<Runtime> rt;
  Status s = Runtime::Create(nullptr, nullptr, {}, &rt);
  ASSERT_TRUE(s.ok()) << s;
  g_fake.device_count = 3;
  ASSERT_EQ(testing::fake::SetDevice(0), cudaSuccess);
  CommOptions o;
  o.backend = Backend::kNccl;
  o.nccl.device = 2;
  std::unique_ptr<Communicator> comm;
  s = CreateNcclCommunicator(*rt, o, FakeNcclApi(), &comm);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(g_fake.init_device, 2);
  EXPECT_EQ(testing::fake::t_current_device, 2);
  EXPECT_EQ(comm->device(), 2) << "through the public interface";
  comm.reset();
  rt.reset();
}

// Issue 14, item 5: the mpi backend refuses device memory with a Status
// (a device pointer reached memcpy and MPI, and the process faulted),
// asking CUDA (here the stand-in) only once a CUDA context exists.
TEST_F(NcclBootstrap, MpiBackendRefusesDeviceBuffersAsCudaReportsThem) {
  std::unique_ptr<Runtime> rt;
  Status s = Runtime::Create(nullptr, nullptr, {}, &rt);
  ASSERT_TRUE(s.ok()) << s;
  CommOptions o;
  o.backend = Backend::kMpi;
  std::unique_ptr<Communicator> comm;
  s = mpi::CreateMpiCommunicator(*rt, o, MakeHostBufferCheck(FakeNcclApi()), &comm);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(comm->device(), -1) << "the mpi backend has no device";
  float x[4] = {1, 1, 1, 1}, y[4] = {};
  // No CUDA context in the process: CUDA is not asked (asking would make one).
  g_fake.primary_context_active = false;
  s = comm->AllReduce(x, y, 4, DType::kF32, ReduceOp::kSum);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(y[3], static_cast<float>(Size()));
  EXPECT_EQ(g_fake.pointer_queries, 0);
  // A context: host memory passes, asked once per buffer.
  g_fake.primary_context_active = true;
  g_fake.pointer_type = cudaMemoryTypeUnregistered;
  s = comm->AllReduce(x, y, 4, DType::kF32, ReduceOp::kSum);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(g_fake.pointer_queries, 2);
  g_fake.pointer_type = cudaMemoryTypeManaged;
  s = comm->Broadcast(x, 4, DType::kF32, 0);
  EXPECT_TRUE(s.ok()) << "managed memory is host-accessible: " << s;
  // Device memory: refused by name before any MPI call, on every rank alike.
  g_fake.pointer_type = cudaMemoryTypeDevice;
  g_fake.pointer_device = 1;
  s = comm->AllReduce(x, y, 4, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_TRUE(Has(s, "all_reduce: send buffer 0x")) << s;
  EXPECT_TRUE(Has(s, "is device memory (CUDA device 1); the mpi backend takes host memory")) << s;
  std::unique_ptr<Request> req;
  s = comm->IAllGather(x, y, 1, DType::kF32, &req);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << "non-blocking, refused at issue: " << s;
  EXPECT_EQ(comm->AllToAll(x, y, 1, DType::kF32).code(), Code::kInvalidArgument);
  // Still a working communicator afterwards.
  g_fake.pointer_type = cudaMemoryTypeUnregistered;
  EXPECT_TRUE(comm->Barrier().ok());
  comm.reset();
  rt.reset();
}

}  // namespace
}  // namespace baton::nccl
