// The batch-invariant route for products (set_batch_invariant, weft/backend/cpu.h). c = a · b
// goes through Weft's fixed-order kernel (fixed_order_gemm.cpp), row-independent by
// construction, where the build has it. Otherwise, and for c = a · bᵀ, in blocks of rows of a,
// each copied into the same zero-padded scratch shape and multiplied by one single-threaded call
// of one provider. Every row then goes through a call of the same shape, provider, leading
// dimensions and thread count, whatever the product's row count, so neither provider can pick
// another kernel or split k by m or threads. oneDNN takes 48 rows a call; OpenBLAS one (its
// kernels round a row differently by its place in a call: tests/batch_invariance_test.cpp
// found rows 0-8 and 9 of a 32-row call differing).
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "sgemm.h"
#include "weft/backend/cpu.h"

namespace weft::backend::cpu {
namespace {

// Scratch floats aligned to 64 bytes, grown as needed, one per thread.
class Scratch {
 public:
  float* get(std::int64_t floats) {
    if (floats > capacity_) {
      storage_.reset(new float[std::size_t(floats) + 16]);
      capacity_ = floats;
    }
    const auto address = reinterpret_cast<std::uintptr_t>(storage_.get());
    return storage_.get() + (((64 - address % 64) % 64) / sizeof(float));
  }

 private:
  std::unique_ptr<float[]> storage_;
  std::int64_t capacity_ = 0;
};

// The calling thread's OpenMP count is 1 while it lives: oneDNN asks OpenMP for its threads, and
// outside a parallel region it would split a block's product over all of them.
class OneOpenMpThread {
 public:
  OneOpenMpThread() : before_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneOpenMpThread() { omp_set_num_threads(before_); }
  OneOpenMpThread(const OneOpenMpThread&) = delete;
  OneOpenMpThread& operator=(const OneOpenMpThread&) = delete;

 private:
  int before_;
};

struct InvariantProduct : ProductOperands {
  GemmProvider provider;
  bool transpose_b;
};

// Rows [first, first + rows) of the product (those past m are zero padding).
void multiply_block(const InvariantProduct& p, std::int64_t first, std::int64_t rows) {
  const std::int64_t used = std::min(rows, p.m - first);
  thread_local Scratch a_scratch, c_scratch;
  float* a = a_scratch.get(rows * p.k);
  float* c = c_scratch.get(rows * p.n);
  for (std::int64_t r = 0; r < used; ++r)
    std::memcpy(a + r * p.k, p.a + (first + r) * p.lda, std::size_t(p.k) * sizeof(float));
  std::fill(a + used * p.k, a + rows * p.k, 0.0f);
  if (p.beta != 0.0f) {
    for (std::int64_t r = 0; r < used; ++r)
      std::memcpy(c + r * p.n, p.c + (first + r) * p.ldc, std::size_t(p.n) * sizeof(float));
    std::fill(c + used * p.n, c + rows * p.n, 0.0f);
  }
  sgemm_with(p.provider, false, p.transpose_b, rows, p.n, p.k, p.alpha, a, p.k, p.b, p.ldb, p.beta,
             c, p.n);
  for (std::int64_t r = 0; r < used; ++r)
    std::memcpy(p.c + (first + r) * p.ldc, c + r * p.n, std::size_t(p.n) * sizeof(float));
}

}  // namespace

void invariant_item_sgemm(GemmProvider provider, bool transpose_a, bool transpose_b, std::int64_t m,
                          std::int64_t n, std::int64_t k, float alpha, const float* a,
                          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
                          std::int64_t ldc) {
  const OneOpenMpThread one;
  sgemm_with(provider, transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// oneDNN: a multiple of its kernels' tile across our rows (6 with AVX2, 8 with AVX-512), so no
// row lands in an edge tile, whose kernel rounds differently (seen with ONEDNN_MAX_CPU_ISA=AVX2
// and 32 rows: rows 30 and 31 of a call differed).
std::int64_t invariant_row_block(GemmProvider provider) {
  return provider == GemmProvider::kOneDnn ? 48 : 1;
}

void invariant_sgemm(GemmProvider provider, bool transpose_b, std::int64_t m, std::int64_t n,
                     std::int64_t k, float alpha, const float* a, std::int64_t lda, const float* b,
                     std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (!transpose_b && fixed_order_sgemm_built())
    return fixed_order_sgemm(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  const InvariantProduct product{
      {m, n, k, alpha, a, lda, b, ldb, beta, c, ldc}, provider, transpose_b};
  const std::int64_t rows = invariant_row_block(provider);
  const std::int64_t blocks = (m + rows - 1) / rows;
  const int threads = int(std::min<std::int64_t>(num_threads(), blocks));
  if (threads <= 1) {
    const OneOpenMpThread one;
    for (std::int64_t block = 0; block < blocks; ++block)
      multiply_block(product, block * rows, rows);
    return;
  }
  // Inside an active parallel region oneDNN runs each call on its calling thread; OpenBLAS is
  // held to one thread while the mode is on (gemm.cpp).
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t block = 0; block < blocks; ++block) multiply_block(product, block * rows, rows);
}

}  // namespace weft::backend::cpu
