#include "ckpt/checksum.h"

#include <xxhash.h>

#include <new>

namespace baton::ckpt {

uint64_t Xxh3(const void* data, size_t n) { return XXH3_64bits(data, n); }

struct Xxh3Stream::State {
  XXH3_state_t* s;
};

Xxh3Stream::Xxh3Stream() : state_(new State{XXH3_createState()}) {
  if (state_->s == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(state_->s);
}

Xxh3Stream::~Xxh3Stream() { XXH3_freeState(state_->s); }

void Xxh3Stream::Update(const void* data, size_t n) { XXH3_64bits_update(state_->s, data, n); }

uint64_t Xxh3Stream::Digest() const { return XXH3_64bits_digest(state_->s); }

std::string HexU64(uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) out[static_cast<size_t>(i)] = kDigits[v & 15];
  return out;
}

bool ParseHexU64(std::string_view text, uint64_t* v) {
  if (text.size() != 16) return false;
  uint64_t r = 0;
  for (char c : text) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return false;
    r = (r << 4) | static_cast<uint64_t>(d);
  }
  *v = r;
  return true;
}

}  // namespace baton::ckpt
