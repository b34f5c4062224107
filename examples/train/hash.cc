#include "hash.h"

#include <cstdio>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace train {

Hasher::Hasher() : state_(XXH3_createState()) { XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_)); }
Hasher::~Hasher() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Hasher::Update(const void* data, size_t bytes) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, bytes);
}

uint64_t Hasher::Digest() const { return XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_)); }

uint64_t Hash64(const void* data, size_t bytes) { return XXH3_64bits(data, bytes); }

std::string Hex64(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace train
