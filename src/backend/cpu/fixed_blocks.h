// Eigen array expressions evaluated so that each element's result depends on its inputs alone,
// not on its address or on how many elements share the call. Over a dynamic-size map Eigen
// computes the elements before the first aligned packet and after the last whole one with scalar
// code (std::exp where the packets use Eigen's own polynomial; a * b + c the compiler may fuse),
// so an example's values could change in the last bits with its position in a batch. Here every
// element goes through one fixed-size expression: whole blocks of kFixedBlock floats in place,
// the last partial block through zero-padded copies (batch invariance: weft/backend/cpu.h).
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

namespace weft::backend::cpu {

// A multiple of every packet width (SSE 4, AVX 8, AVX-512 16 floats).
constexpr std::int64_t kFixedBlock = 16;
using FixedBlock = Eigen::Array<float, kFixedBlock, 1>;
using FixedBlockMap = Eigen::Map<FixedBlock>;
using ConstFixedBlockMap = Eigen::Map<const FixedBlock>;

// For each block of n elements: fn(out_block, in_blocks...), fn assigning its first argument
// from the others (kAccumulate: adding into it, so out's old values are read). Every call gets
// maps of the same types, whole block or tail, so one instantiation of fn computes them all.
// `out` may be one of the inputs (element for element).
template <bool kAccumulate = false, typename Fn, typename... In>
void for_fixed_blocks(std::int64_t n, float* out, Fn fn, const In*... in) {
  std::int64_t i = 0;
  for (; i + kFixedBlock <= n; i += kFixedBlock) {
    FixedBlockMap out_block(out + i);
    fn(out_block, ConstFixedBlockMap(in + i)...);
  }
  if (i == n) return;
  const std::int64_t rest = n - i;
  auto padded = [&](const float* p) {
    FixedBlock block = FixedBlock::Zero();
    std::copy_n(p + i, rest, block.data());
    return block;
  };
  FixedBlock tail = kAccumulate ? padded(out) : FixedBlock::Zero();
  const std::array<FixedBlock, sizeof...(In)> tail_in = {padded(in)...};
  FixedBlockMap tail_out(tail.data());
  [&]<std::size_t... k>(std::index_sequence<k...>) {
    fn(tail_out, ConstFixedBlockMap(tail_in[k].data())...);
  }
  (std::index_sequence_for<In...>{});
  std::copy_n(tail.data(), rest, out + i);
}

// Σ x[i] for i < n in an order fixed by n alone: kFixedBlock running sums (the last block
// zero-padded), then those added first to last.
inline float fixed_order_sum(const float* x, std::int64_t n) {
  FixedBlock lanes = FixedBlock::Zero();
  std::int64_t i = 0;
  for (; i + kFixedBlock <= n; i += kFixedBlock) lanes += ConstFixedBlockMap(x + i);
  for (std::int64_t j = 0; i + j < n; ++j) lanes[j] += x[i + j];
  float total = 0.0f;
  for (std::int64_t j = 0; j < kFixedBlock; ++j) total += lanes[j];
  return total;
}

}  // namespace weft::backend::cpu
