// Batch invariance at the kernels (weft/backend/cpu.h, set_batch_invariant), seeded properties:
// an example's row gives bit-identical results alone and at a random position of a random batch,
// at any address: the transcendentals, row softmaxes and the fused LSTM kernels in every mode,
// and products x · W in the mode, through each built-in GEMM provider, on 1 and 2 threads; and
// Weft's fixed-order product kernel against its definition, element by element.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "backend/cpu/sgemm.h"
#include "backend/kernels.h"
#include "op_test_util.h"
#include "weft/backend/cpu.h"
#include "weft/backend/gemm_selection.h"
#include "weft/core/rng.h"

namespace weft::testing {
namespace {

// The bits of a row, for exact comparison with a readable failure.
std::vector<std::uint32_t> bits(const float* row, std::int64_t n) {
  std::vector<std::uint32_t> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) out[std::size_t(i)] = std::bit_cast<std::uint32_t>(row[i]);
  return out;
}

// A batch of `rows` random rows of `width` at `offset` floats into a buffer (so its address
// varies), with `example` copied to row `position`.
struct PlacedBatch {
  std::vector<float> buffer;
  Tensor tensor;
};
PlacedBatch place(const std::vector<float>& example, std::int64_t rows, std::int64_t position,
                  std::int64_t offset, Rng& rng, float low, float high) {
  const std::int64_t width = std::int64_t(example.size());
  PlacedBatch batch;
  batch.buffer.resize(std::size_t(offset + rows * width));
  for (float& v : batch.buffer) v = rng.uniform(low, high);
  std::copy(example.begin(), example.end(), batch.buffer.begin() + offset + position * width);
  batch.tensor = Tensor::from_external(batch.buffer.data() + offset, {rows, width}, DType::kFloat32,
                                       Device::kCpu, nullptr, nullptr);
  return batch;
}

std::vector<float> random_row(std::int64_t width, Rng& rng, float low, float high) {
  std::vector<float> row(static_cast<std::size_t>(width));
  for (float& v : row) v = rng.uniform(low, high);
  return row;
}

// The row `position` of f(batch) equals the row of f(the example alone), for random batches.
template <typename Kernel>
void expect_rows_invariant(const char* what, std::int64_t width, std::int64_t out_width, float low,
                           float high, Kernel kernel, std::uint64_t seed) {
  Rng rng(seed);
  for (int trial = 0; trial < 12; ++trial) {
    const std::vector<float> example = random_row(width, rng, low, high);
    const PlacedBatch alone = place(example, 1, 0, 0, rng, low, high);
    Tensor alone_out = Tensor::zeros({1, out_width});
    kernel(alone.tensor, alone_out);
    const std::int64_t rows = 1 + std::int64_t(rng.next_u64() % 257);
    const std::int64_t position = std::int64_t(rng.next_u64() % std::uint64_t(rows));
    const PlacedBatch batch =
        place(example, rows, position, std::int64_t(rng.next_u64() % 16), rng, low, high);
    Tensor out = Tensor::zeros({rows, out_width});
    kernel(batch.tensor, out);
    ASSERT_EQ(bits(out.data<float>() + position * out_width, out_width),
              bits(alone_out.data<float>(), out_width))
        << what << ": width " << width << ", row " << position << " of " << rows;
  }
}

TEST(BatchInvariance, TranscendentalsGiveAnElementTheSameBitsAnywhere) {
  for (backend::UnaryOp op : {backend::UnaryOp::kSigmoid, backend::UnaryOp::kTanh,
                              backend::UnaryOp::kExp, backend::UnaryOp::kLog})
    for (std::int64_t width : {1, 3, 16, 21, 100}) {
      const float low = op == backend::UnaryOp::kLog ? 0.01f : -6.0f;
      expect_rows_invariant(
          "unary", width, width, low, 6.0f,
          [op](const Tensor& x, Tensor& y) { backend::cpu::unary(op, x, y); },
          std::uint64_t(width) * 10 + std::uint64_t(op));
    }
}

TEST(BatchInvariance, SoftmaxRowsGiveTheSameBitsAnywhere) {
  for (bool log : {false, true})
    for (std::int64_t width : {2, 5, 17, 40, 301})
      expect_rows_invariant(
          "softmax", width, width, -8.0f, 8.0f,
          [log](const Tensor& x, Tensor& y) { backend::cpu::softmax(x, log, y); },
          std::uint64_t(width) + (log ? 1000 : 0));
}

// A row holds the gates [f_1 f_2 i g o] then the two children's states: the fused cell state
// and hidden state of one row.
TEST(BatchInvariance, FusedLstmRowsGiveTheSameBitsAnywhere) {
  for (std::int64_t n : {3, 16, 19, 50}) {
    const std::int64_t gates = 5 * n;
    auto cell = [n, gates](const Tensor& x, Tensor& h) {
      const std::int64_t rows = x.rows();
      Tensor g = Tensor::zeros({rows, gates}), children = Tensor::zeros({rows, 2 * n});
      for (std::int64_t r = 0; r < rows; ++r) {
        std::memcpy(g.data<float>() + r * gates, x.data<float>() + r * 7 * n,
                    std::size_t(gates) * sizeof(float));
        std::memcpy(children.data<float>() + r * 2 * n, x.data<float>() + r * 7 * n + gates,
                    std::size_t(2 * n) * sizeof(float));
      }
      Tensor c = Tensor::zeros({rows, n});
      backend::cpu::lstm_cell_state(g, children, nullptr, c);
      backend::cpu::lstm_hidden(g, 4 * n, c, h);
    };
    expect_rows_invariant("lstm", 7 * n, n, -3.0f, 3.0f, cell, std::uint64_t(n));
  }
}

// Leaves the backend as it found it: mode, provider and threads.
class InvariantProducts : public ::testing::Test {
 protected:
  void SetUp() override {
    forced_ = forced_gemm_provider();
    threads_ = num_threads();
    invariant_ = batch_invariant();
  }
  void TearDown() override {
    set_batch_invariant(invariant_);
    set_num_threads(threads_);
    if (forced_)
      set_gemm_provider(*forced_);
    else
      use_calibrated_gemm();
  }
  std::optional<GemmProvider> forced_;
  int threads_ = 1;
  bool invariant_ = false;
};

// c = x · W (or x · Wᵀ; accumulating into c or not): a row of x alone, at 1 thread, against the
// same row at a random position of up to 300 rows, at 1 and 2 threads.
TEST_F(InvariantProducts, EachRowOfAProductHasTheSameBitsInAnyBatch) {
  set_batch_invariant(true);
  for (GemmProvider provider : available_gemm_providers()) {
    set_gemm_provider(provider);
    SCOPED_TRACE(std::string(gemm_provider_name(provider)));
    std::uint64_t seed = 1;
    for (std::int64_t n : {1, 7, 64, 130})
      for (std::int64_t k : {1, 5, 33, 128, 300})
        for (bool transpose_b : {false, true})
          for (bool accumulate : {false, true}) {
            const Tensor w = random_tensor(transpose_b ? Shape{n, k} : Shape{k, n}, seed++);
            auto product = [&](const Tensor& x, Tensor& c) {
              backend::cpu::gemm(x, false, w, transpose_b, 1.0f, accumulate ? 1.0f : 0.0f, c);
            };
            for (int threads : {1, 2}) {
              set_num_threads(1);
              Rng rng(seed++);
              // The accumulated-into c starts at zero on both sides: its rows are not the
              // example's, the product's are.
              const std::vector<float> example = random_row(k, rng, -1.0f, 1.0f);
              const PlacedBatch alone = place(example, 1, 0, 0, rng, -1.0f, 1.0f);
              Tensor alone_out = Tensor::zeros({1, n});
              product(alone.tensor, alone_out);
              set_num_threads(threads);
              const std::int64_t rows = 1 + std::int64_t(rng.next_u64() % 300);
              const std::int64_t position = std::int64_t(rng.next_u64() % std::uint64_t(rows));
              const PlacedBatch batch = place(example, rows, position,
                                              std::int64_t(rng.next_u64() % 16), rng, -1.0f, 1.0f);
              Tensor out = Tensor::zeros({rows, n});
              product(batch.tensor, out);
              ASSERT_EQ(bits(out.data<float>() + position * n, n), bits(alone_out.data<float>(), n))
                  << "n " << n << " k " << k << (transpose_b ? " Wt" : " W")
                  << (accumulate ? " +=" : "") << ", row " << position << " of " << rows << " at "
                  << threads << " thread(s)";
            }
          }
  }
}

// fixed_order_sgemm's contract (sgemm.h), element by element: one fused chain over k from 0, then
// alpha, then beta · c in one fused step. So a row's bits cannot depend on anything else: rows
// around it, tile edges of n, leading dimensions, threads, or the vector width it was built for.
TEST_F(InvariantProducts, FixedOrderKernelIsOneFusedChainPerElement) {
  if (!backend::cpu::fixed_order_sgemm_built()) GTEST_SKIP() << "built without FMA vectors";
  Rng rng(41);
  for (std::int64_t n : {1, 8, 15, 16, 17, 33, 64, 70, 200})
    for (std::int64_t k : {1, 7, 100})
      for (const auto& [alpha, beta] :
           {std::pair{1.0f, 0.0f}, {0.5f, 0.0f}, {1.0f, 1.0f}, {-2.0f, -0.25f}})
        for (std::int64_t m :
             {std::int64_t(1), std::int64_t(2), 3 + std::int64_t(rng.next_u64() % 40)}) {
          const std::int64_t lda = k + 3, ldb = n + 5, ldc = n + 2;
          const std::vector<float> a = random_row(m * lda, rng, -1.0f, 1.0f);
          const std::vector<float> b = random_row(k * ldb, rng, -1.0f, 1.0f);
          const std::vector<float> c0 = random_row(m * ldc, rng, -1.0f, 1.0f);
          std::vector<float> want = c0;
          for (std::int64_t r = 0; r < m; ++r)
            for (std::int64_t j = 0; j < n; ++j) {
              float sum = 0.0f;
              for (std::int64_t q = 0; q < k; ++q)
                sum = std::fma(a[std::size_t(r * lda + q)], b[std::size_t(q * ldb + j)], sum);
              if (alpha != 1.0f) sum = alpha * sum;
              float& out = want[std::size_t(r * ldc + j)];
              out = beta != 0.0f ? std::fma(beta, out, sum) : sum;
            }
          for (int threads : {1, 2}) {
            set_num_threads(threads);
            std::vector<float> got = c0;
            backend::cpu::fixed_order_sgemm(m, n, k, alpha, a.data(), lda, b.data(), ldb, beta,
                                            got.data(), ldc);
            ASSERT_EQ(bits(got.data(), m * ldc), bits(want.data(), m * ldc))
                << m << " x " << n << " x " << k << ", alpha " << alpha << ", beta " << beta << ", "
                << threads << " thread(s)";
          }
        }
}

TEST_F(InvariantProducts, TheModeIsReportedAndUndone) {
  set_batch_invariant(true);
  EXPECT_TRUE(batch_invariant());
  EXPECT_NE(std::string(cpu_backend_summary()).find("batch-invariant"), std::string::npos);
  EXPECT_EQ(gemm_selection_report().mode.rfind("batch-invariant: ", 0), 0u);
  set_batch_invariant(false);
  EXPECT_FALSE(batch_invariant());
  EXPECT_EQ(std::string(cpu_backend_summary()).find("batch-invariant"), std::string::npos);
}

}  // namespace
}  // namespace weft::testing
