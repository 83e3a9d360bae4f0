// Weft's own product kernel for the batch-invariant mode (invariant_gemm.cpp): c = alpha · a · b
// + beta · c with b row-major [k, n], each element one chain of fused multiply-adds over k in
// order, so a row's values depend on that row, b and k alone: not on the row count, the row's
// place, the tiling or the thread count, and no row needs padding. Vectorised across n (AVX-512
// or AVX2 with FMA, chosen at compile time); tiles of kRows rows by two vectors (wider for 1-4
// rows), each column tile of b held in L1 while every row passes it.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "sgemm.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#define WEFT_FIXED_ORDER_GEMM 1
#endif

namespace weft::backend::cpu {

#ifdef WEFT_FIXED_ORDER_GEMM
namespace {

// The vector operations the kernel needs; `count` lanes (0 to kWidth) of a partial vector are
// read or written, the rest read as zero.
#if defined(__AVX512F__)
struct Simd {
  using V = __m512;
  static constexpr int kWidth = 16, kRows = 8;
  static __mmask16 mask(int count) { return __mmask16((1u << count) - 1u); }
  static V zero() { return _mm512_setzero_ps(); }
  static V broadcast(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load(const float* p, int count) { return _mm512_maskz_loadu_ps(mask(count), p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void store(float* p, V v, int count) { _mm512_mask_storeu_ps(p, mask(count), v); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
};
#else
struct Simd {
  using V = __m256;
  static constexpr int kWidth = 8, kRows = 6;
  static __m256i mask(int count) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V zero() { return _mm256_setzero_ps(); }
  static V broadcast(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load(const float* p, int count) { return _mm256_maskload_ps(p, mask(count)); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void store(float* p, V v, int count) { _mm256_maskstore_ps(p, mask(count), v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
};
#endif

using V = Simd::V;
constexpr int kWidth = Simd::kWidth;
constexpr int kTileColumns = 2 * kWidth;

using Product = ProductOperands;

// The finished element: alpha · sum, then beta · c added in one fused step.
inline V finish(const Product& p, V sum, V old) {
  if (p.alpha != 1.0f) sum = Simd::mul(Simd::broadcast(p.alpha), sum);
  return p.beta != 0.0f ? Simd::fma(Simd::broadcast(p.beta), old, sum) : sum;
}

// Rows [row, row + kRowsUsed) by kVectors vectors of columns from `column` (`columns` of them
// when not kFull).
template <int kRowsUsed, int kVectors, bool kFull>
void tile(const Product& p, std::int64_t row, std::int64_t column, int columns) {
  int counts[kVectors];
  for (int v = 0; v < kVectors; ++v)
    counts[v] = kFull ? kWidth : std::clamp(columns - v * kWidth, 0, kWidth);
  V sums[kRowsUsed][kVectors];
  for (int r = 0; r < kRowsUsed; ++r)
    for (int v = 0; v < kVectors; ++v) sums[r][v] = Simd::zero();
  const float* a = p.a + row * p.lda;
  const float* b = p.b + column;
  for (std::int64_t q = 0; q < p.k; ++q, b += p.ldb) {
    V bq[kVectors];
#pragma GCC unroll 8
    for (int v = 0; v < kVectors; ++v)
      bq[v] = kFull ? Simd::load(b + v * kWidth) : Simd::load(b + v * kWidth, counts[v]);
#pragma GCC unroll 8
    for (int r = 0; r < kRowsUsed; ++r) {
      const V x = Simd::broadcast(a[r * p.lda + q]);
#pragma GCC unroll 8
      for (int v = 0; v < kVectors; ++v) sums[r][v] = Simd::fma(x, bq[v], sums[r][v]);
    }
  }
  for (int r = 0; r < kRowsUsed; ++r) {
    float* c = p.c + (row + r) * p.ldc + column;
    for (int v = 0; v < kVectors; ++v) {
      float* out = c + v * kWidth;
      if (kFull) {
        Simd::store(out, finish(p, sums[r][v], p.beta != 0.0f ? Simd::load(out) : Simd::zero()));
      } else if (counts[v] > 0) {
        const V old = p.beta != 0.0f ? Simd::load(out, counts[v]) : Simd::zero();
        Simd::store(out, finish(p, sums[r][v], old), counts[v]);
      }
    }
  }
}

// tile<rows, 2, kFull> for rows in 1..kRows, chosen at run time.
template <bool kFull>
void tile_of_rows(int rows, const Product& p, std::int64_t row, std::int64_t column, int columns) {
  using Tile = void (*)(const Product&, std::int64_t, std::int64_t, int);
  static constexpr auto tiles = []<std::size_t... r>(std::index_sequence<r...>) {
    return std::array<Tile, sizeof...(r)>{&tile<int(r) + 1, 2, kFull>...};
  }
  (std::make_index_sequence<Simd::kRows>{});
  tiles[std::size_t(rows - 1)](p, row, column, columns);
}

// Every row against the column tile at `column`: b's tile stays in L1 while the rows pass.
void column_tile(const Product& p, std::int64_t column) {
  const int columns = int(std::min<std::int64_t>(kTileColumns, p.n - column));
  for (std::int64_t row = 0; row < p.m; row += Simd::kRows) {
    const int rows = int(std::min<std::int64_t>(Simd::kRows, p.m - row));
    if (columns == kTileColumns)
      tile_of_rows<true>(rows, p, row, column, columns);
    else
      tile_of_rows<false>(rows, p, row, column, columns);
  }
}

// A product of kRowsUsed rows (a lone example's level) in tiles of kVectors vectors: wider
// than two, so that each step over k reads more of b's row, which streams from L2, per row.
template <int kRowsUsed, int kVectors>
void few_rows(const Product& p) {
  constexpr int kColumns = kVectors * kWidth;
  for (std::int64_t column = 0; column < p.n; column += kColumns) {
    const int columns = int(std::min<std::int64_t>(kColumns, p.n - column));
    if (columns == kColumns)
      tile<kRowsUsed, kVectors, true>(p, 0, column, columns);
    else
      tile<kRowsUsed, kVectors, false>(p, 0, column, columns);
  }
}

// Whether a product of p.m rows went through few_rows: 1 row in tiles of 8 vectors; with 32
// vector registers (AVX-512) also 2-4 rows in tiles of 4.
bool as_few_rows(const Product& p) {
  switch (p.m) {
    case 1:
      few_rows<1, 8>(p);
      return true;
#if defined(__AVX512F__)
    case 2:
      few_rows<2, 4>(p);
      return true;
    case 3:
      few_rows<3, 4>(p);
      return true;
    case 4:
      few_rows<4, 4>(p);
      return true;
#endif
    default:
      return false;
  }
}

}  // namespace

bool fixed_order_sgemm_built() { return true; }

void fixed_order_sgemm(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                       std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
                       std::int64_t ldc) {
  const Product p{m, n, k, alpha, a, lda, b, ldb, beta, c, ldc};
  if (as_few_rows(p)) return;
  const std::int64_t tiles = (n + kTileColumns - 1) / kTileColumns;
  // Threads share out column tiles; an element's sum is the same whichever thread makes it.
  const int threads =
      m * n * k >= (std::int64_t(1) << 18) ? int(std::min<std::int64_t>(num_threads(), tiles)) : 1;
  if (threads <= 1) {
    for (std::int64_t t = 0; t < tiles; ++t) column_tile(p, t * kTileColumns);
    return;
  }
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t t = 0; t < tiles; ++t) column_tile(p, t * kTileColumns);
}

#else  // no FMA vectors in this build: invariant_gemm.cpp keeps to its provider's row blocks

bool fixed_order_sgemm_built() { return false; }

void fixed_order_sgemm(std::int64_t, std::int64_t, std::int64_t, float, const float*, std::int64_t,
                       const float*, std::int64_t, float, float*, std::int64_t) {
  WEFT_ASSERT(false && "fixed_order_sgemm is not built in");
}

#endif

}  // namespace weft::backend::cpu
