// Rng: an explicit, seedable random number generator (xoshiro256**). Weft never draws from
// hidden global state: initializers, dropout and shuffling take an Rng, so the same seed
// gives the same numbers on every platform.
#pragma once

#include <array>
#include <cstdint>

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft {

class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0);

  std::uint64_t next_u64();
  // Uniform in [0, 1), 24 random bits.
  float uniform();
  // Uniform in [low, high).
  float uniform(float low, float high);
  // Standard normal (Box-Muller).
  float normal();
  // Uniform integer in [0, n).
  std::uint64_t below(std::uint64_t n);

  // The generator's four state words, so a checkpoint can save them and a resumed run can
  // continue the same stream; set_state rejects the all-zero state, where xoshiro is stuck.
  std::array<std::uint64_t, 4> state() const;
  void set_state(const std::array<std::uint64_t, 4>& state);

 private:
  std::uint64_t state_[4];
};

// A stateless 64-bit mix of (seed, counter): the counter-based generator behind dropout
// masks, identical on every device.
constexpr std::uint64_t mix64(std::uint64_t seed, std::uint64_t counter) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (counter + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace weft
WEFT_API_END
