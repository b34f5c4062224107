#include "ordered_sum.h"

#include <algorithm>
#include <string>

namespace train {

OrderedSum::OrderedSum(baton::Communicator* comm, uint32_t micro_batches, size_t n)
    : comm_(comm), micro_batches_(micro_batches), n_(n) {
  const int world = comm->size();
  slice_ = (n + static_cast<size_t>(world) - 1) / static_cast<size_t>(world);
  most_ = 0;
  for (int r = 0; r < world; ++r) {
    shares_.push_back(ShareOf(micro_batches, world, r));
    most_ = std::max(most_, shares_.back().count);
  }
  share_ = shares_[static_cast<size_t>(comm->rank())];
  // Block j of send_ (to rank j): this rank's micro-batches' slices j, one
  // after the other; a rank with a smaller block pads (all-to-all moves
  // equal blocks).
  const size_t block = size_t{most_} * slice_;
  send_.assign(block * static_cast<size_t>(world), 0.0f);
  recv_.assign(send_.size(), 0.0f);
  mine_.assign(slice_, 0.0f);
  all_.assign(slice_ * static_cast<size_t>(world), 0.0f);
}

void OrderedSum::Put(uint32_t q, const float* v) {
  const size_t world = static_cast<size_t>(comm_->size());
  for (size_t j = 0; j < world; ++j) {
    const size_t begin = std::min(n_, j * slice_), end = std::min(n_, begin + slice_);
    std::copy(v + begin, v + end, send_.begin() + static_cast<std::ptrdiff_t>((j * most_ + q) * slice_));
  }
}

baton::Status OrderedSum::Sum(std::vector<float>* out) {
  const size_t block = size_t{most_} * slice_;
  BATON_RETURN_IF_ERROR(comm_->AllToAll(send_.data(), recv_.data(), block, baton::DType::kF32)
                            .Annotate("the ordered gradient sum's all-to-all"));
  // Block j of recv_ holds rank j's micro-batches' slices of this rank's
  // part; micro-batch m is on the rank whose block covers it.
  size_t j = 0;
  for (uint32_t m = 0; m < micro_batches_; ++m) {
    while (m >= shares_[j].first + shares_[j].count) ++j;
    const float* v = recv_.data() + j * block + (m - shares_[j].first) * slice_;
    if (m == 0)
      std::copy(v, v + slice_, mine_.begin());
    else
      for (size_t i = 0; i < slice_; ++i) mine_[i] += v[i];
  }
  BATON_RETURN_IF_ERROR(comm_->AllGather(mine_.data(), all_.data(), slice_, baton::DType::kF32)
                            .Annotate("the ordered gradient sum's all-gather"));
  out->assign(all_.begin(), all_.begin() + static_cast<std::ptrdiff_t>(n_));
  return baton::Status::OK();
}

}  // namespace train
