// xxh3-64 over byte ranges, for the data set's checksum and the final
// checksum of the weights. xxhash is used header-only (XXH_INLINE_ALL), so
// the example needs xxhash.h (libxxhash-dev) to build but nothing to link.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace train {

class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  void Update(const void* data, size_t bytes);
  uint64_t Digest() const;

 private:
  void* state_;  // XXH3_state_t
};

uint64_t Hash64(const void* data, size_t bytes);

// "0123456789abcdef": 16 lower-case hex digits.
std::string Hex64(uint64_t h);

}  // namespace train
