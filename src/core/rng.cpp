// xoshiro256** seeded through splitmix64 (mix64), plus the derived distributions.
#include "weft/core/rng.h"

#include <cmath>

#include "weft/core/error.h"

namespace weft {
namespace {
__extension__ typedef unsigned __int128 Uint128;
constexpr std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(std::uint64_t seed) {
  for (int i = 0; i < 4; ++i) state_[i] = mix64(seed, std::uint64_t(i));
}

std::uint64_t Rng::next_u64() {
  const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
  const std::uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = rotl(state_[3], 45);
  return result;
}

float Rng::uniform() { return float(next_u64() >> 40) * 0x1.0p-24f; }

float Rng::uniform(float low, float high) { return low + (high - low) * uniform(); }

float Rng::normal() {
  float u1 = uniform();
  float u2 = uniform();
  if (u1 < 1e-12f) u1 = 1e-12f;
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.28318530717958647692f * u2);
}

std::array<std::uint64_t, 4> Rng::state() const {
  return {state_[0], state_[1], state_[2], state_[3]};
}

void Rng::set_state(const std::array<std::uint64_t, 4>& state) {
  if (state[0] == 0 && state[1] == 0 && state[2] == 0 && state[3] == 0)
    fail("rng", "the all-zero state is invalid for xoshiro256** (it would only produce zeros)");
  for (int i = 0; i < 4; ++i) state_[i] = state[std::size_t(i)];
}

std::uint64_t Rng::below(std::uint64_t n) {
  // Lemire's multiply-shift; the tiny bias is irrelevant for shuffling and sampling here.
  return std::uint64_t(Uint128(next_u64()) * n >> 64);
}

}  // namespace weft
