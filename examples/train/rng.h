// The random numbers of baton-train, written out rather than taken from
// <random>: the distributions of the standard library are not specified
// bit for bit, and a resumed run must draw exactly what the first run drew.
// xoshiro256** (Blackman and Vigna), seeded through splitmix64.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

namespace train {

inline uint64_t SplitMix64(uint64_t* x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class Rng {
 public:
  using State = std::array<uint64_t, 4>;

  // Streams: one seed gives independent streams for the weights, the data
  // set, each epoch's shuffle and each micro-batch's dropout.
  Rng(uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (stream * 0xd1342543de82ef95ULL);
    for (uint64_t& s : s_) s = SplitMix64(&x);
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 24 random bits: exact in float.
  float Uniform() { return static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f); }

  // Uniform in [0, n) without modulo bias (Lemire's multiply-shift with rejection).
  uint64_t Below(uint64_t n) {
    while (true) {
      const unsigned __int128 m = static_cast<unsigned __int128>(Next()) * n;
      const uint64_t low = static_cast<uint64_t>(m);
      if (low >= n || low >= (0 - n) % n) return static_cast<uint64_t>(m >> 64);
    }
  }

  // A standard normal (Box-Muller, one of the pair).
  double Normal() {
    const double u1 = (static_cast<double>(Next() >> 11) + 1.0) * (1.0 / 9007199254740992.0);  // (0, 1]
    const double u2 = static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

  const State& state() const { return s_; }
  void set_state(const State& s) { s_ = s; }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  State s_;
};

// Stream numbers (see Rng's constructor).
inline constexpr uint64_t kStreamWeights = 1, kStreamData = 2;
inline uint64_t EpochStream(uint64_t epoch) { return (uint64_t{1} << 32) + epoch; }
// Micro-batch m's dropout, whichever rank computes it.
inline uint64_t DropoutStream(uint32_t micro_batch) { return (uint64_t{2} << 32) + micro_batch; }

}  // namespace train
