// baton::Bucketer: gradient bucketing. Many small arrays are all-reduced
// as a few large ones: their elements are copied into buckets of at most
// `bucket_bytes`, each bucket is reduced with ONE Communicator::AllReduce,
// and the results are copied back.
//
//   baton::Bucketer bucketer(comm.get());            // 25 MiB buckets
//   std::vector<baton::BucketArray> grads = {{w1.data(), w1.size(), baton::DType::kF32}, ...};
//   baton::Status s = bucketer.AllReduce(grads, baton::ReduceOp::kAvg);
//   bucketer.last_reductions();                       // AllReduce calls that took
//
// Packing. The arrays of one dtype are taken in the order given as one
// stream of elements, cut into buckets of bucket_bytes / DTypeSize elements
// (an array may straddle two buckets: every bucket but the last of a dtype
// is full). So the arrays of one dtype that fit in a bucket cost
// ceil(their bytes / bucket bytes) reductions. An array larger than a
// bucket is reduced on its own, in place, without a copy; an empty one
// costs nothing. Arrays of different dtypes go to different buckets. The
// order of the reductions depends only on the list (counts and dtypes),
// which must be the same on every rank.
//
// Results equal reducing each array alone (the reductions are
// element-wise; ReduceOp::kAvg divides once per element, as AllReduce does).
//
// Host memory only: a communicator of the nccl backend is refused. Not
// thread-safe (the staging buffers are kept between calls, so a training
// loop allocates them once); one thread calls a Bucketer, the thread that
// issues the communicator's collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "baton/communicator.h"
#include "baton/dtype.h"
#include "baton/status.h"

namespace baton {

// One array to reduce in place: `count` elements of `dtype` at `data`.
struct BucketArray {
  void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::kF32;
};

struct BucketerOptions {
  // The largest bucket, in bytes (rounded down to whole elements per dtype).
  size_t bucket_bytes = size_t{25} << 20;  // 25 MiB, as PyTorch DDP
};

class Bucketer {
 public:
  // `comm` must outlive the Bucketer.
  explicit Bucketer(Communicator* comm, BucketerOptions options = {});
  Bucketer(const Bucketer&) = delete;
  Bucketer& operator=(const Bucketer&) = delete;

  // All-reduces every array in place with `op`. Collective: every rank
  // passes the same counts and dtypes in the same order. Bad arguments
  // (a null array with elements, avg on an integer dtype, a zero bucket
  // size, a nccl communicator) are refused before any reduction.
  Status AllReduce(const std::vector<BucketArray>& arrays, ReduceOp op);

  // AllReduce calls issued to the communicator by the last call of
  // AllReduce, and by all calls since construction.
  size_t last_reductions() const { return last_reductions_; }
  uint64_t total_reductions() const { return total_reductions_; }

  const BucketerOptions& options() const { return options_; }

 private:
  Communicator* comm_;
  BucketerOptions options_;
  std::vector<std::vector<char>> staging_;  // one per dtype, indexed by the enum
  size_t last_reductions_ = 0;
  uint64_t total_reductions_ = 0;
};

}  // namespace baton
