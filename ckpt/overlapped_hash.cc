#include "ckpt/overlapped_hash.h"

#include <system_error>

namespace baton::ckpt {

OverlappedHash::~OverlappedHash() { Wait(); }

void OverlappedHash::Wait() {
  if (pending_.valid()) pending_.get();  // the task cannot throw: XXH3 updates only
}

void OverlappedHash::Submit(const void* data, size_t n) {
  Wait();
  if (n == 0) return;
  try {
    pending_ = std::async(std::launch::async, [this, data, n] { sum_.Update(data, n); });
  } catch (const std::system_error&) {
    // No thread (EAGAIN: a process at its thread limit): the restore still
    // verifies every byte, only without the overlap.
    sum_.Update(data, n);
  }
}

uint64_t OverlappedHash::Finish() {
  Wait();
  return sum_.Digest();
}

}  // namespace baton::ckpt
