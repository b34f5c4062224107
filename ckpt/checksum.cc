#include "ckpt/checksum.h"

#include <xxhash.h>

#include "baton_config.h"
#if BATON_HAVE_XXH3_DISPATCH
// The dispatcher's entry points replace XXH3_64bits and XXH3_64bits_update
// (the header's macros): AVX2 or AVX-512 chosen at run time, where the
// library's plain ones are SSE2 only: a restore hashes every byte it reads,
// at 3.4-4 GB/s with SSE2 against 10-11.5 GB/s with AVX2 on this project's
// node, more than the copy of warm pages costs (m4/baton_xxhash.m4).
#include <xxh_x86dispatch.h>
#endif

#include <charconv>
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

void Xxh3Stream::Reset() { XXH3_64bits_reset(state_->s); }

std::string HexU64(uint64_t v) {
  char digits[16];
  const auto r = std::to_chars(digits, digits + sizeof digits, v, 16);
  std::string out(16 - static_cast<size_t>(r.ptr - digits), '0');
  return out.append(digits, r.ptr);
}

bool ParseHexU64(std::string_view text, uint64_t* v) {
  // from_chars takes no sign, prefix or space, so sixteen characters all
  // consumed are sixteen hex digits (either case).
  if (text.size() != 16) return false;
  uint64_t x = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), x, 16);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size()) return false;
  *v = x;
  return true;
}

}  // namespace baton::ckpt
