// rng.h - the fuzzers' random numbers: splitmix64, so that a seed means the same calls and
// messages on every platform and with every standard library.
#pragma once

#include <cstdint>
#include <vector>

namespace kvstore_fuzz {

struct Rng {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int Int(int lo, int hi) {  // inclusive
    return lo + static_cast<int>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool Chance(int percent) { return Int(0, 99) < percent; }
  template <typename T> const T& Pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(Int(0, static_cast<int>(v.size()) - 1))];
  }
};

// The seed of stream `index` (a session, a message) of run `seed`: streams are independent,
// so one can be replayed alone.
inline uint64_t Mix(uint64_t seed, uint64_t index) {
  Rng r{seed ^ (index * 0xD1B54A32D192ED03ull)};
  r.Next();
  return r.Next();
}

}  // namespace kvstore_fuzz
