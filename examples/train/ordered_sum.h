// The sum over the micro-batches of a step of one float vector each (the
// gradients and the loss), with every element added in micro-batch order,
//   out[i] = ((v_0[i] + v_1[i]) + v_2[i]) + ... + v_{M-1}[i],
// on every rank: the same bits whatever the world size and whichever rank
// computed which micro-batch, since float addition is not associative and
// any other order (a ring's, a tree's over ranks) depends on the world.
//
// Reduce-scatter by owner, then all-gather: rank r owns slice r of the
// vector (n/W elements); one all-to-all brings it every micro-batch's
// slice r, it adds them in micro-batch order, and an all-gather returns the
// summed slices to everyone. Per rank that sends about (M/W)(W-1)/W n
// elements and receives as many, then (W-1)/W n for the all-gather, against
// 2(W-1)/W n for a ring all-reduce of one summed vector: the price of the
// fixed order grows with the micro-batches per rank (docs/benchmarks.md).
#pragma once

#include <baton/communicator.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "micro_batches.h"

namespace train {

class OrderedSum {
 public:
  // `comm` outlives this; vectors of `n` elements; this rank holds the
  // micro-batches ShareOf(micro_batches, comm->size(), comm->rank()).
  OrderedSum(baton::Communicator* comm, uint32_t micro_batches, size_t n);

  // Sets the vector of this rank's q-th micro-batch (micro-batch
  // share().first + q): n elements from `v`.
  void Put(uint32_t q, const float* v);

  // Collective: *out = the ordered sum of every micro-batch's vector (n
  // elements), on every rank. Every local micro-batch must have been Put.
  baton::Status Sum(std::vector<float>* out);

  const Share& share() const { return share_; }

 private:
  baton::Communicator* comm_;
  uint32_t micro_batches_;
  size_t n_, slice_;          // elements of a vector and of one rank's slice (padded: world * slice >= n)
  uint32_t most_;             // the largest block of micro-batches: every rank sends this many slices
  Share share_;
  std::vector<Share> shares_;  // every rank's
  std::vector<float> send_, recv_, mine_, all_;
};

}  // namespace train
