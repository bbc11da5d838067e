// A small, portable random number generator (SplitMix64) whose whole state is one integer, so it
// is saved in checkpoints and gives the same numbers on every platform and compiler (the
// distributions of <random> do not).
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace xsa {

struct Rng {
  uint64_t state = 0;

  explicit Rng(uint64_t seed = 0) : state(seed) {}
  uint64_t next_u64() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1): never exactly 0, so log() below is safe.
  double uniform() { return ((next_u64() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
  // Standard normal by Box–Muller (one value per call, no cached second value: the state stays
  // a single integer).
  double normal() {
    double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

// FNV-1a, to derive an independent stream per named tensor from one seed.
inline uint64_t hash_name(std::string_view s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace xsa
