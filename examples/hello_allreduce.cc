// The first multi-node job: every rank says where it runs, all ranks
// all-reduce their ranks, and each checks the sum. Public API only (built
// like a user's program: pkg-config baton). Run as
//   sbatch -N4 examples/first-job.sbatch
#include <baton/communicator.h>
#include <baton/log.h>
#include <baton/runtime.h>

#include <cstdint>
#include <memory>

int main(int argc, char** argv) {
  std::unique_ptr<baton::Runtime> rt;
  baton::Status s = baton::Runtime::Create(&argc, &argv, {}, &rt);
  if (!s.ok()) {
    BATON_LOG(kRuntime, error) << s;
    return baton::kRequeueExitCode;
  }
  baton::CommOptions opts;
  opts.backend = baton::Backend::kMpi;  // host memory below
  std::unique_ptr<baton::Communicator> comm;
  if (!(s = baton::CreateCommunicator(*rt, opts, &comm)).ok()) {
    BATON_LOG(kRuntime, error) << s;
    return baton::kRequeueExitCode;
  }
  int64_t sum = rt->rank();
  if (!(s = comm->AllReduce(&sum, &sum, 1, baton::DType::kI64, baton::ReduceOp::kSum)).ok()) {
    BATON_LOG(kRuntime, error) << s;
    return baton::kRequeueExitCode;
  }
  const int64_t size = rt->size(), expected = size * (size - 1) / 2;
  if (sum != expected) {
    BATON_LOG(kRuntime, error) << "all-reduce gave " << sum << ", expected " << expected;
    return 1;
  }
  BATON_LOG(kRuntime, info) << "one of " << size << " ranks on node " << rt->node_rank()
                            << "; all-reduce of ranks = " << sum << " (correct)";
  return 0;
}
