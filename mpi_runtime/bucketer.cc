#include "baton/bucketer.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace baton {
namespace {

constexpr const char* kComponent = "runtime";

size_t Index(DType t) { return static_cast<size_t>(t); }

// A piece of one array that sits in the open bucket of its dtype.
struct Piece {
  char* array;         // where the piece goes back to
  size_t bucket_elem;  // where it sits in the bucket
  size_t elems;
};

}  // namespace

Bucketer::Bucketer(Communicator* comm, BucketerOptions options)
    : comm_(comm), options_(options), staging_(kNumDTypes) {}

Status Bucketer::AllReduce(const std::vector<BucketArray>& arrays, ReduceOp op) {
  last_reductions_ = 0;
  if (comm_ == nullptr) return Status::InvalidArgument(kComponent, "bucketer: no communicator");
  if (comm_->backend() == Backend::kNccl)
    return Status::InvalidArgument(kComponent, "bucketer: host arrays only; the nccl backend's are on the device");
  if (options_.bucket_bytes == 0) return Status::InvalidArgument(kComponent, "bucketer: bucket_bytes is 0");

  // Everything is checked before the first reduction, so that every rank
  // (given the same list) fails the same way without entering a collective.
  size_t small_elems[kNumDTypes] = {};
  for (size_t i = 0; i < arrays.size(); ++i) {
    const BucketArray& a = arrays[i];
    if (a.count == 0) continue;
    if (a.data == nullptr)
      return Status::InvalidArgument(kComponent, "bucketer: array " + std::to_string(i) + " of " +
                                                     std::to_string(a.count) + " elements is null");
    Status reducible = CheckReducible(a.dtype, op);
    if (!reducible.ok())
      return Status::InvalidArgument(kComponent, "bucketer: array " + std::to_string(i) + ": " + reducible.message());
    const size_t cap = options_.bucket_bytes / DTypeSize(a.dtype);
    if (a.count <= cap) small_elems[Index(a.dtype)] += a.count;
  }

  // Staging buffers: as large as this call needs, at most one bucket; kept.
  for (size_t d = 0; d < kNumDTypes; ++d) {
    const DType t = static_cast<DType>(d);
    const size_t cap = options_.bucket_bytes / DTypeSize(t);
    const size_t need = std::min(cap, small_elems[d]) * DTypeSize(t);
    if (staging_[d].size() < need) staging_[d].resize(need);
  }

  size_t used[kNumDTypes] = {};
  std::vector<Piece> pieces[kNumDTypes];
  std::vector<DType> order;  // dtypes in the order their first bucket opened

  auto flush = [&](DType t) -> Status {
    const size_t d = Index(t), esize = DTypeSize(t);
    char* bucket = staging_[d].data();
    Status s = comm_->AllReduce(bucket, bucket, used[d], t, op);
    ++last_reductions_;
    ++total_reductions_;
    if (!s.ok())
      return s.Annotate("bucketer: bucket of " + std::to_string(used[d]) + " " + std::string(DTypeName(t)));
    for (const Piece& p : pieces[d]) std::memcpy(p.array, bucket + p.bucket_elem * esize, p.elems * esize);
    pieces[d].clear();
    used[d] = 0;
    return Status::OK();
  };

  for (size_t i = 0; i < arrays.size(); ++i) {
    const BucketArray& a = arrays[i];
    if (a.count == 0) continue;
    const DType t = a.dtype;
    const size_t d = Index(t), esize = DTypeSize(t), cap = options_.bucket_bytes / esize;
    if (a.count > cap) {
      // Larger than a bucket: reduced where it is, no copy.
      Status s = comm_->AllReduce(a.data, a.data, a.count, t, op);
      ++last_reductions_;
      ++total_reductions_;
      if (!s.ok()) return s.Annotate("bucketer: array " + std::to_string(i) + " (reduced alone)");
      continue;
    }
    if (std::find(order.begin(), order.end(), t) == order.end()) order.push_back(t);
    char* src = static_cast<char*>(a.data);
    for (size_t off = 0; off < a.count;) {
      const size_t take = std::min(a.count - off, cap - used[d]);
      std::memcpy(staging_[d].data() + used[d] * esize, src + off * esize, take * esize);
      pieces[d].push_back(Piece{src + off * esize, used[d], take});
      used[d] += take;
      off += take;
      if (used[d] == cap) BATON_RETURN_IF_ERROR(flush(t));
    }
  }
  for (DType t : order)
    if (used[Index(t)] > 0) BATON_RETURN_IF_ERROR(flush(t));
  return Status::OK();
}

}  // namespace baton
