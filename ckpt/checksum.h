// xxh3 (64-bit) over checkpoint bytes, through libxxhash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace baton::ckpt {

uint64_t Xxh3(const void* data, size_t n);

// For data that arrives in pieces; the digest equals Xxh3 of the whole.
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  void Update(const void* data, size_t n);
  uint64_t Digest() const;
  void Reset();  // as if new: the digest of what follows

 private:
  struct State;
  std::unique_ptr<State> state_;
};

std::string HexU64(uint64_t v);                    // 16 lower-case hex digits
bool ParseHexU64(std::string_view text, uint64_t* v);  // exactly 16 hex digits

}  // namespace baton::ckpt
