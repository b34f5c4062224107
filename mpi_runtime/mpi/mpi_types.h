// How the mpi backend hands baton's types to MPI: the MPI datatype and op
// of a dtype (f16/bf16 travel as f32, their work type), the checks every
// collective makes on its arguments, and what happens to a buffer that a
// collective abandoned at its deadline still uses.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>
#include <vector>

#include "baton/dtype.h"
#include "baton/status.h"

#if defined(__SANITIZE_ADDRESS__)
#define BATON_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define BATON_LSAN 1
#endif
#endif
#ifndef BATON_LSAN
#define BATON_LSAN 0
#endif
#if BATON_LSAN
#include <sanitizer/lsan_interface.h>
#endif

namespace baton::mpi {

inline constexpr const char* kComponent = "runtime";

// The MPI type of a work type (WorkType(t) in reduce_kernels.h).
MPI_Datatype MpiType(DType work);
// MPI's op for a reduction; kAvg reduces as MPI_SUM and is divided after.
MPI_Op MpiOp(ReduceOp op);

bool IsHalf(DType t);

// The reductions CheckReducible (baton/dtype.h) allows: else InvalidArgument
// naming `what`, the op and the type.
Status CheckOp(const char* what, DType t, ReduceOp op);

// `count` elements of `esize` bytes times `blocks` fit in a size_t (else
// InvalidArgument naming `what` and the count): the sizes baton computes.
Status CheckSize(const char* what, size_t count, size_t esize, size_t blocks = 1);

// A block of `bytes` bytes as one MPI message: (bytes, MPI_BYTE) when
// bytes fits MPI's int count, else (1, a derived datatype of exactly
// `bytes` bytes: 1 MiB units and the rest), so that broadcast, all-gather
// and all-to-all move blocks past 2 GiB whole (MPI 3 has no large counts).
// The datatype is freed with the object (MPI keeps a freed datatype alive
// for the communication that uses it).
class ByteBlock {
 public:
  explicit ByteBlock(size_t bytes);
  ~ByteBlock();
  ByteBlock(const ByteBlock&) = delete;
  ByteBlock& operator=(const ByteBlock&) = delete;
  // The Status of making the datatype (OK for MPI_BYTE).
  const Status& status() const { return status_; }
  int count() const { return count_; }
  MPI_Datatype type() const { return type_; }

 private:
  int count_ = 0;
  MPI_Datatype type_ = MPI_BYTE;
  bool derived_ = false;
  Status status_;
};

// The most elements one MPI call of an element type takes here: larger
// reductions are cut into calls of at most this many (element-wise, so the
// result is the same).
inline constexpr size_t kMaxCallCount = size_t{1} << 30;

// A collective that passed its deadline is still in flight inside MPI and
// may yet read or write its buffers: a temporary buffer it uses is handed
// over to it (leaked) instead of freed.
// Under LeakSanitizer the block is registered as kept on purpose, so that
// a sanitizer run reports only leaks nobody meant.
template <typename T>
void Abandon(std::vector<T>* v) {
  auto* kept = new std::vector<T>(std::move(*v));  // the heap block moves with it
#if BATON_LSAN
  __lsan_ignore_object(kept);
  if (kept->data() != nullptr) __lsan_ignore_object(kept->data());
#else
  (void)kept;
#endif
}

// The same for a block of its own (new[]) handed to a call in flight.
inline void KeepInFlight(const void* block) {
#if BATON_LSAN
  __lsan_ignore_object(block);
#else
  (void)block;
#endif
}

// "1048576 bytes": the size of `count` elements of `t`, for messages.
std::string Bytes(size_t count, DType t);

}  // namespace baton::mpi
