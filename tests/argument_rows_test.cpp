// Issue 42's argument model: the row products against gather-then-product (bit for bit where
// the sums run in one order, within float32 rounding against sgemm), and the loom's arguments
// read where they lie (argument_rows) against gathered ones: the same outputs and gradients for
// a Tree-LSTM cell (children twice the same value included), gradients against finite
// differences, ops that read the value whole, inference by default, and bytes not moved.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "../src/backend/kernels.h"
#include "op_test_util.h"
#include "weft/autodiff/argument_rows.h"
#include "weft/backend/counters.h"
#include "weft/core/rng.h"
#include "weft/loom/executor.h"

namespace weft::testing {
namespace {

// Rows of three source matrices in random order, as two column blocks (widths w0, w1).
struct Scattered {
  std::vector<Tensor> sources;
  backend::RowBlocks blocks;
  Tensor gathered;  // the same rows, copied into one [rows, w0 + w1] matrix
};

Scattered scattered(std::int64_t rows, std::int64_t w0, std::int64_t w1, std::uint64_t seed) {
  Scattered s;
  Rng rng(seed);
  for (std::int64_t width : {w0, w1, w0})
    s.sources.push_back(random_tensor({rows + 3, width}, rng.next_u64()));
  s.blocks.rows = rows;
  s.blocks.widths = {w0, w1};
  s.gathered = Tensor::empty(Shape{rows, w0 + w1}, DType::kFloat32, Device::kCpu);
  for (std::int64_t p = 0; p < 2; ++p)
    for (std::int64_t i = 0; i < rows; ++i) {
      // Block 0 from source 0 or 2 (same width), block 1 from source 1.
      const Tensor& source = s.sources[p == 1 ? 1 : 2 * rng.below(2)];
      float* row = const_cast<float*>(source.data<float>()) +
                   std::int64_t(rng.below(std::uint64_t(rows + 3))) * source.row_size();
      s.blocks.pointers.push_back(row);
      std::copy_n(row, source.row_size(), s.gathered.data<float>() + i * (w0 + w1) + (p ? w0 : 0));
    }
  return s;
}

// The same rows' blocks where the gathered copy holds them.
backend::RowBlocks blocks_of(const Tensor& dense, std::int64_t w0, std::int64_t w1) {
  backend::RowBlocks b{dense.rows(), {w0, w1}, {}, {}};
  for (std::int64_t p = 0; p < 2; ++p)
    for (std::int64_t i = 0; i < dense.rows(); ++i)
      b.pointers.push_back(const_cast<float*>(dense.data<float>()) + i * dense.row_size() +
                           (p ? w0 : 0));
  return b;
}

void expect_close(const Tensor& got, const Tensor& want, std::int64_t k, const char* what) {
  const std::vector<float> g = got.to_float_vector(), w = want.to_float_vector();
  ASSERT_EQ(g.size(), w.size()) << what;
  // Sums of k products of values in [-1, 1): float32 rounding grows with k.
  const double tolerance = 1e-6 * double(k) + 1e-6;
  for (std::size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], w[i], tolerance * std::max(1.0, std::abs(double(w[i])))) << what << " " << i;
}

struct ProductShape {
  std::int64_t rows, w0, w1, n;
};
const ProductShape kShapes[] = {{1, 2, 1, 5},      {5, 9, 8, 33},       {7, 40, 24, 70},
                                {13, 64, 64, 128}, {31, 150, 150, 129}, {40, 3, 5, 16}};

TEST(RowProducts, ReadRowsEqualsGatherThenProduct) {
  for (const ProductShape& s : kShapes) {
    const Scattered x = scattered(s.rows, s.w0, s.w1, 11 + std::uint64_t(s.n));
    const Tensor w = random_tensor({s.w0 + s.w1, s.n}, 12);
    Tensor packed, y = Tensor::empty(Shape{s.rows, s.n}, DType::kFloat32, Device::kCpu);
    backend::pack_panels(w, false, packed);
    backend::product_read_rows(x.blocks, packed, y);
    Tensor want = Tensor::empty(Shape{s.rows, s.n}, DType::kFloat32, Device::kCpu);
    backend::gemm(x.gathered, false, w, false, 1.0f, 0.0f, want);
    expect_close(y, want, s.w0 + s.w1, "x · W");
    // Read from the gathered copy instead: the same sums in the same order, bit for bit.
    Tensor again = Tensor::empty(Shape{s.rows, s.n}, DType::kFloat32, Device::kCpu);
    backend::product_read_rows(blocks_of(x.gathered, s.w0, s.w1), packed, again);
    EXPECT_EQ(again.to_float_vector(), y.to_float_vector());
  }
}

TEST(RowProducts, TransposedReadRowsEqualsGatherThenProduct) {
  for (const ProductShape& s : kShapes)
    for (float beta : {0.0f, 1.0f, 0.5f}) {
      const Scattered x = scattered(s.rows, s.w0, s.w1, 21 + std::uint64_t(s.rows));
      const Tensor dy = random_tensor({s.rows, s.n}, 22);
      Tensor dw = random_tensor({s.w0 + s.w1, s.n}, 23), want = dw.clone();
      backend::product_transposed_read_rows(x.blocks, dy, beta, dw);
      backend::gemm(x.gathered, true, dy, false, 1.0f, beta, want);
      expect_close(dw, want, s.rows, "xᵀ · dy");
    }
}

TEST(RowProducts, WriteRowsOverwritesOrAddsEachRowAsMarked) {
  for (const ProductShape& s : kShapes) {
    const Tensor dy = random_tensor({s.rows, s.n}, 31), w = random_tensor({s.w0 + s.w1, s.n}, 32);
    Tensor targets = random_tensor({2 * s.rows, std::max(s.w0, s.w1)}, 33);
    Tensor want = targets.clone();
    backend::RowBlocks dx{s.rows, {s.w0, s.w1}, {}, {}};
    Rng rng(34);
    for (std::int64_t p = 0; p < 2; ++p)
      for (std::int64_t i = 0; i < s.rows; ++i) {
        dx.pointers.push_back(targets.data<float>() + (2 * i + p) * targets.row_size());
        dx.add.push_back(std::uint8_t(rng.below(2)));
      }
    Tensor packed,
        product = Tensor::empty(Shape{s.rows, s.w0 + s.w1}, DType::kFloat32, Device::kCpu);
    backend::pack_panels(w, true, packed);
    backend::product_write_rows(dy, packed, dx);
    backend::gemm(dy, false, w, true, 1.0f, 0.0f, product);
    for (std::int64_t p = 0; p < 2; ++p)
      for (std::int64_t i = 0; i < s.rows; ++i) {
        float* row = want.data<float>() + (2 * i + p) * want.row_size();
        const float* from = product.data<float>() + i * product.row_size() + (p ? s.w0 : 0);
        for (std::int64_t j = 0; j < (p ? s.w1 : s.w0); ++j)
          row[j] = dx.adds(std::size_t(p), i) ? row[j] + from[j] : from[j];
      }
    expect_close(targets, want, s.n, "dy · Wᵀ into rows");
  }
}

// A Tree-LSTM over words as the ICLR benchmark builds it: children concatenated, h0 =
// relu([l | r] · W0 + b0), c = σ(f_l) l + σ(f_r) r + σ(i) tanh(g) with gates = h0 · W1 + b1.
struct CellLoom {
  static constexpr std::int64_t kN = 5;
  loom::Loom loom;
  Parameter table{"table", random_tensor({12, kN}, 41)};
  Parameter w0{"w0", random_tensor({2 * kN, kN}, 42)}, b0{"b0", random_tensor({kN}, 43)};
  Parameter w1{"w1", random_tensor({kN, 4 * kN}, 44)}, b1{"b1", random_tensor({4 * kN}, 45)};
  loom::OpId leaf = 0, cell = 0, whole = 0;
  loom::TypeId word = 0, hidden = 0;

  CellLoom() {
    const loom::TypeShape word_type{DType::kInt32, {}, "word"};
    const loom::TypeShape hidden_type{DType::kFloat32, {kN}, "hidden"};
    leaf = loom.add_operation("leaf", {word_type}, {hidden_type}, [this](std::span<const Var> in) {
      return std::vector<Var>{embedding_lookup(Tape::current().parameter(table), in[0].value())};
    });
    loom::OperationOptions concat;
    concat.concat_inputs = true;
    cell = loom.add_operation(
        "cell", {hidden_type, hidden_type}, {hidden_type},
        [this](std::span<const Var> in) {
          const Var h0 = linear_relu(in[0], w0, b0);
          return std::vector<Var>{linear_lstm_cell_state(h0, w1, b1, in[0])};
        },
        concat);
    // An op that reads its argument whole (matmul): the rows are gathered when it reads them.
    whole = loom.add_operation(
        "whole", {hidden_type, hidden_type}, {hidden_type},
        [this](std::span<const Var> in) {
          return std::vector<Var>{tanh(matmul(in[0], Tape::current().parameter(w0)))};
        },
        concat);
    word = loom.type_id(word_type);
    hidden = loom.type_id(hidden_type);
  }

  std::vector<Parameter> parameters() const { return {table, w0, b0, w1, b1}; }

  // Random trees of `leaves` leaves; every third internal node combines one subtree with
  // itself (a value read twice by one call), every fifth through `whole`.
  void weave(loom::Weaver& weaver, int trees, int leaves, std::uint64_t seed) const {
    Rng rng(seed);
    for (int t = 0; t < trees; ++t) {
      std::vector<loom::Value> stack;
      int made = 0;
      for (int l = 0; l < leaves; ++l) {
        const auto id = std::int32_t(rng.below(12));
        stack.push_back(weaver.call(leaf, {weaver.constant(word, std::span(&id, 1))})[0]);
        while (stack.size() >= 2 && rng.below(2) == 0) {
          const loom::Value right = stack.back();
          stack.pop_back();
          const loom::Value left = ++made % 3 == 0 ? right : stack.back();
          stack.back() = weaver.call(made % 5 == 0 ? whole : cell, {left, right})[0];
        }
      }
      while (stack.size() >= 2) {
        const loom::Value right = stack.back();
        stack.pop_back();
        stack.back() = weaver.call(cell, {stack.back(), right})[0];
      }
      weaver.add_output(stack.back());
    }
  }
};

struct CellRun {
  std::vector<float> outputs;
  std::vector<std::vector<float>> grads;  // per parameter
  std::int64_t bytes_moved = 0;           // by gathers and scatters
};

CellRun run_cells(const CellLoom& m, ReadRows when, bool train) {
  set_read_rows_in_place(when);
  loom::Weaver weaver(m.loom);
  m.weave(weaver, 6, 9, 51);
  for (Parameter p : m.parameters()) p.zero_grad();
  Tape tape;
  TapeScope scope(tape);
  tape.set_grad_enabled(train);
  const bool was = set_work_profiling(true);
  const BackendCounters before = backend_counters();
  loom::Executor executor(m.loom, tape);
  const loom::LoomResult result = executor.run(weaver, loom::Strategy::kByDepth);
  const Var out = result.outputs(m.hidden);
  CellRun run;
  run.outputs = out.value().to_float_vector();
  if (train) {
    const Tensor c = Tensor::from_vector(out.shape(), random_cotangent(run.outputs.size(), 52));
    tape.backward(out, c);
    for (const Parameter& p : m.parameters()) run.grads.push_back(p.grad().to_float_vector());
  }
  const WorkProfile profile = (backend_counters() - before).profile;
  for (bool backward : {false, true})
    run.bytes_moved += profile.of(backward, WorkKind::kGather).bytes +
                       profile.of(backward, WorkKind::kScatter).bytes;
  set_work_profiling(was);
  set_read_rows_in_place(ReadRows::kWithoutGradients);
  return run;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 + 1e-5 * std::abs(want[i])) << what << " " << i;
}

TEST(ArgumentRows, ReadInPlaceTrainsAsGatheredArgumentsDo) {
  const CellLoom m;
  const CellRun gathered = run_cells(m, ReadRows::kNever, true);
  const CellRun in_place = run_cells(m, ReadRows::kAlways, true);
  expect_close(in_place.outputs, gathered.outputs, "outputs");
  const char* names[] = {"table", "w0", "b0", "w1", "b1"};
  for (std::size_t p = 0; p < gathered.grads.size(); ++p)
    expect_close(in_place.grads[p], gathered.grads[p], names[p]);
  // Only the embedding's rows (and the arguments of `whole`) still move.
  EXPECT_LT(in_place.bytes_moved, gathered.bytes_moved / 2);
}

// The cell worked through in blocks of a few rows (set_linear_cell_block_rows), its children's
// rows read and their gradients written in place block by block: the same training as the
// whole calls gathered.
TEST(ArgumentRows, BlocksOfTheCellReadAndWriteInPlaceAsWholeCallsDo) {
  const CellLoom m;
  const CellRun gathered = run_cells(m, ReadRows::kNever, true);
  for (std::int64_t block_rows : {1, 3}) {
    SCOPED_TRACE("blocks of " + std::to_string(block_rows) + " rows");
    set_linear_cell_block_rows(block_rows);
    const CellRun in_place = run_cells(m, ReadRows::kAlways, true);
    const CellRun blocked_gathered = run_cells(m, ReadRows::kNever, true);
    set_linear_cell_block_rows(0);
    expect_close(in_place.outputs, gathered.outputs, "outputs");
    expect_close(blocked_gathered.outputs, gathered.outputs, "outputs, gathered");
    const char* names[] = {"table", "w0", "b0", "w1", "b1"};
    for (std::size_t p = 0; p < gathered.grads.size(); ++p) {
      expect_close(in_place.grads[p], gathered.grads[p], names[p]);
      expect_close(blocked_gathered.grads[p], gathered.grads[p], names[p]);
    }
  }
}

TEST(ArgumentRows, InferenceReadsInPlaceByDefault) {
  const CellLoom m;
  const CellRun gathered = run_cells(m, ReadRows::kNever, false);
  const CellRun by_default = run_cells(m, ReadRows::kWithoutGradients, false);
  expect_close(by_default.outputs, gathered.outputs, "outputs");
  EXPECT_LT(by_default.bytes_moved, gathered.bytes_moved);
}

TEST(ArgumentRows, GradientsMatchFiniteDifferences) {
  const CellLoom m;
  set_read_rows_in_place(ReadRows::kAlways);
  loom::Weaver weaver(m.loom);
  m.weave(weaver, 3, 6, 61);
  const std::vector<float> weights = random_cotangent(3 * CellLoom::kN, 62);
  auto loss = [&](bool backward) {
    Tape tape;
    TapeScope scope(tape);
    loom::Executor executor(m.loom, tape);
    const Var out = executor.run(weaver, loom::Strategy::kByDepth).outputs(m.hidden);
    const Tensor c = Tensor::from_vector(out.shape(), weights);
    if (backward) tape.backward(out, c);
    double total = 0;
    const std::vector<float> y = out.value().to_float_vector();
    for (std::size_t i = 0; i < y.size(); ++i) total += double(weights[i]) * y[i];
    return total;
  };
  for (Parameter p : m.parameters()) p.zero_grad();
  loss(true);
  for (Parameter p : {m.w0, m.w1, m.table}) {
    const std::vector<float> analytic = p.grad().to_float_vector();
    std::span<float> values(p.value().data<float>(), std::size_t(p.value().numel()));
    check_finite_differences(
        p.name(), values, analytic, [&] { return loss(false); }, 1e-2, 2e-3, 2e-2, 3);
  }
  set_read_rows_in_place(ReadRows::kWithoutGradients);
}

TEST(ArgumentRows, AKeptValueIsComputedBeforeItsSourcesAreDropped) {
  set_read_rows_in_place(ReadRows::kAlways);
  Tape tape;
  TapeScope scope(tape);
  tape.set_grad_enabled(false);
  const Tensor a = random_tensor({3, 2}, 71), b = random_tensor({2, 2}, 72);
  const Var va = tape.constant(a.clone()), vb = tape.constant(b.clone());
  const std::uint32_t first = tape.size();
  const Var x = tape.record(a.clone(), {va}, nullptr), y = tape.record(b.clone(), {vb}, nullptr);
  // Rows (x 2, y 0, x 0): refs as (source, row).
  const Tensor refs = Tensor::from_vector(Shape{3, 2}, std::vector<std::int32_t>{0, 2, 1, 0, 0, 0});
  const std::int64_t width = 2;
  const Var rows =
      argument_rows(std::vector<Var>{x, y}, refs, 3, std::span(&width, 1), Shape{3, 2});
  ASSERT_TRUE(detail::reads_in_place(tape, rows.id()));
  const std::uint32_t keep = rows.id();
  tape.drop_values(first, std::span(&keep, 1));
  EXPECT_FALSE(x.value().defined());
  const std::vector<float> got = rows.value().to_float_vector(), va_ = a.to_float_vector(),
                           vb_ = b.to_float_vector();
  EXPECT_EQ(got, (std::vector<float>{va_[4], va_[5], vb_[0], vb_[1], va_[0], va_[1]}));
  set_read_rows_in_place(ReadRows::kWithoutGradients);
}

}  // namespace
}  // namespace weft::testing
