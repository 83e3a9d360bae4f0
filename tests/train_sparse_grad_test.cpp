// Row-sparse gradients (an embedding table's) and the optimizers' lazy updates of only the rows
// a batch touched: the rows recorded by the tape against the dense gradient, duplicates summed;
// each rule's lazy step against its dense step on the touched rows, untouched rows and their
// state left alone; the exact dense behaviour on request; clipping and the global norm over a
// mix of sparse and dense gradients; a small model's training steps, sparse against dense; the
// optimizer state round trip. Parameters live on Device::kCpu.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "op_test_util.h"
#include "weft/autodiff/ops.h"
#include "weft/backend/tensor_ops.h"
#include "weft/nn/embedding.h"
#include "weft/nn/parameter_store.h"
#include "weft/train/optimizer.h"

namespace weft::testing {
namespace {

using train::OptimizerKind;
using train::OptimizerSpec;
using train::SparseUpdate;
using train::WeightDecayMode;

constexpr std::int64_t kRows = 9;
constexpr std::int64_t kDim = 5;

// Float vectors equal within a relative tolerance (the row kernel and the whole-tensor kernel
// may differ in FMA contraction of the vector tail).
void expect_near(const std::vector<float>& a, const std::vector<float>& b, const std::string& what,
                 double tolerance = 2e-6) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], tolerance * (1.0 + std::abs(double(b[i])))) << what << " at " << i;
}

std::vector<float> row_of(const std::vector<float>& values, std::int64_t row) {
  return {values.begin() + row * kDim, values.begin() + (row + 1) * kDim};
}

// The ids a step touches (with repeats) and its gradient rows, deterministic in t.
struct StepGrad {
  std::vector<std::int32_t> ids;
  Tensor rows;
};

StepGrad step_grad(int t) {
  static const std::vector<std::vector<std::int32_t>> kIds = {
      {2, 5, 2, 7}, {0, 5}, {8, 3, 3, 3, 1}, {5, 2}, {6, 0, 6}, {4}};
  StepGrad g;
  g.ids = kIds[std::size_t(t) % kIds.size()];
  g.rows = random_tensor({std::int64_t(g.ids.size()), kDim}, 100 + std::uint64_t(t), -2.0f, 2.0f);
  return g;
}

// The dense [kRows, kDim] gradient of a step: its rows scatter-added.
Tensor dense_of(const StepGrad& g) {
  Tensor dense = Tensor::zeros({kRows, kDim});
  std::vector<float> d = dense.to_float_vector();
  const std::vector<float> rows = g.rows.to_float_vector();
  for (std::size_t i = 0; i < g.ids.size(); ++i)
    for (std::int64_t c = 0; c < kDim; ++c)
      d[std::size_t(g.ids[i] * kDim + c)] += rows[i * std::size_t(kDim) + std::size_t(c)];
  return Tensor::from_vector({kRows, kDim}, d);
}

// Gives a sparse table this step's gradient through the tape, as an embedding lookup would.
void backward_through_lookup(Parameter& table, const StepGrad& g) {
  Tape tape;
  Var y = embedding_lookup(tape.parameter(table), int_tensor({std::int64_t(g.ids.size())}, g.ids));
  tape.backward(y, g.rows);
}

std::vector<OptimizerSpec> specs() {
  std::vector<OptimizerSpec> out;
  auto add = [&](OptimizerKind kind, double momentum, bool nesterov, double decay,
                 WeightDecayMode mode) {
    OptimizerSpec s;
    s.kind = kind;
    s.momentum = momentum;
    s.nesterov = nesterov;
    s.weight_decay = decay;
    s.weight_decay_mode = mode;
    s.initial_accumulator = kind == OptimizerKind::kAdagrad ? 0.1 : 0.0;
    out.push_back(s);
  };
  for (WeightDecayMode mode : {WeightDecayMode::kL2, WeightDecayMode::kDecoupled}) {
    for (double decay : {0.0, 0.05}) {
      add(OptimizerKind::kSgd, 0.0, false, decay, mode);
      add(OptimizerKind::kSgd, 0.9, false, decay, mode);
      add(OptimizerKind::kSgd, 0.9, true, decay, mode);
      add(OptimizerKind::kAdagrad, 0.0, false, decay, mode);
      add(OptimizerKind::kAdam, 0.0, false, decay, mode);
    }
  }
  return out;
}

TEST(SparseGrad, LookupRecordsRowsThatSumToTheDenseGradient) {
  Parameter sparse("table", random_tensor({kRows, kDim}, 1));
  Parameter dense("table", sparse.value().clone());
  sparse.set_sparse_grad(true);
  const StepGrad g = step_grad(2);  // row 3 three times
  backward_through_lookup(sparse, g);
  backward_through_lookup(dense, g);
  ASSERT_TRUE(sparse.grad_is_row_sparse());
  EXPECT_FALSE(dense.grad_is_row_sparse());
  const RowSparseGrad& rows = sparse.row_sparse_grad();
  EXPECT_EQ(rows.indices.to_int_vector(), (std::vector<std::int32_t>{1, 3, 8}));
  const std::vector<float> full = dense.grad().to_float_vector();
  const std::vector<float> got = rows.rows.to_float_vector();
  for (std::size_t k = 0; k < 3; ++k) {
    const std::int64_t r = rows.indices.to_int_vector()[k];
    EXPECT_EQ(std::vector<float>(got.begin() + std::int64_t(k) * kDim,
                                 got.begin() + std::int64_t(k + 1) * kDim),
              row_of(full, r))
        << "row " << r;
  }
  // The dense view: the rows scatter-added in recording order, as the dense path adds them.
  EXPECT_EQ(sparse.grad().to_float_vector(), full);
  EXPECT_FALSE(sparse.grad_is_row_sparse());  // held densely until zero_grad
  sparse.zero_grad();
  EXPECT_TRUE(sparse.grad_is_row_sparse());
  EXPECT_EQ(sparse.row_sparse_grad().indices.numel(), 0);
  EXPECT_EQ(sparse.grad().to_float_vector(), std::vector<float>(kRows * kDim, 0.0f));
}

TEST(SparseGrad, PiecesFromSeveralBackwardsAccumulateAndCoalesce) {
  Parameter sparse("table", Tensor::zeros({kRows, kDim}));
  sparse.set_sparse_grad(true);
  Tensor expected = Tensor::zeros({kRows, kDim});
  for (int t : {0, 3, 2}) {  // rows 2 and 5 in two backwards, 3 three times in one
    backward_through_lookup(sparse, step_grad(t));
    backend::add_scaled(dense_of(step_grad(t)), 1.0f, expected);
  }
  const RowSparseGrad& rows = sparse.row_sparse_grad();
  EXPECT_EQ(rows.indices.to_int_vector(), (std::vector<std::int32_t>{1, 2, 3, 5, 7, 8}));
  std::vector<float> d(std::size_t(kRows * kDim), 0.0f);
  const std::vector<float> got = rows.rows.to_float_vector();
  const std::vector<std::int32_t> ids = rows.indices.to_int_vector();
  for (std::size_t k = 0; k < ids.size(); ++k)
    for (std::int64_t c = 0; c < kDim; ++c)
      d[std::size_t(ids[k] * kDim + c)] = got[k * std::size_t(kDim) + std::size_t(c)];
  expect_near(d, expected.to_float_vector(), "coalesced rows");
}

TEST(SparseGrad, ADenseUseOfTheTableFallsBackToTheDenseGradient) {
  Parameter sparse("table", random_tensor({kRows, kDim}, 3));
  Parameter dense("table", sparse.value().clone());
  sparse.set_sparse_grad(true);
  const Tensor ids = int_tensor({3}, {4, 4, 0});
  for (Parameter* p : {&sparse, &dense}) {
    Tape tape;
    Var table = tape.parameter(*p);
    Var loss = sum(embedding_lookup(table, ids)) + l2_loss(table);  // a gather and a dense use
    tape.backward(loss);
  }
  EXPECT_FALSE(sparse.grad_is_row_sparse());
  expect_near(sparse.grad().to_float_vector(), dense.grad().to_float_vector(), "mixed use");
}

// One lazy step of `spec` against one dense step from the same values and state: touched rows
// equal, untouched rows and their slots unchanged. Then the dense side is reset to the lazy
// side's values and state, and the next step (different rows) is compared the same way.
TEST(SparseGrad, LazyStepEqualsDenseStepOnTouchedRowsAndLeavesTheRestAlone) {
  for (const OptimizerSpec& spec : specs()) {
    const std::string what = spec.describe();
    Parameter sparse("embedding/table", random_tensor({kRows, kDim}, 7));
    Parameter dense("embedding/table", sparse.value().clone());
    sparse.set_sparse_grad(true);
    auto lazy = train::make_optimizer(spec, std::vector<Parameter>{sparse});
    auto full = train::make_optimizer(spec, std::vector<Parameter>{dense});
    for (int t = 0; t < 6; ++t) {
      const StepGrad g = step_grad(t);
      const std::set<std::int32_t> touched(g.ids.begin(), g.ids.end());
      const std::vector<float> before = sparse.value().to_float_vector();
      std::vector<std::vector<float>> slots_before;
      for (const auto& [name, tensor] : lazy->state())
        if (!name.ends_with("/step")) slots_before.push_back(tensor.to_float_vector());
      sparse.zero_grad();
      dense.zero_grad();
      backward_through_lookup(sparse, g);
      dense.grad() = dense_of(g);
      const double lr = 0.05 + 0.01 * t;
      lazy->step(lr);
      full->step(lr);
      ASSERT_TRUE(sparse.grad_is_row_sparse()) << what;  // the step did not densify
      const std::vector<float> after = sparse.value().to_float_vector();
      const std::vector<float> want = dense.value().to_float_vector();
      std::size_t k = 0;
      std::vector<std::vector<float>> slots_after, slots_want;
      for (const auto& [name, tensor] : lazy->state())
        if (!name.ends_with("/step")) slots_after.push_back(tensor.to_float_vector());
      for (const auto& [name, tensor] : full->state())
        if (!name.ends_with("/step")) slots_want.push_back(tensor.to_float_vector());
      for (std::int64_t r = 0; r < kRows; ++r) {
        const std::string at = what + ", step " + std::to_string(t) + ", row " + std::to_string(r);
        if (touched.contains(std::int32_t(r))) {
          expect_near(row_of(after, r), row_of(want, r), at);
          for (k = 0; k < slots_after.size(); ++k)
            expect_near(row_of(slots_after[k], r), row_of(slots_want[k], r), at + " slot");
        } else {
          ASSERT_EQ(row_of(after, r), row_of(before, r)) << at;
          for (k = 0; k < slots_after.size(); ++k)
            ASSERT_EQ(row_of(slots_after[k], r), row_of(slots_before[k], r)) << at << " slot";
        }
      }
      // The dense side continues from the lazy side's values and state.
      backend::copy_values(sparse.value(), dense.value());
      full->load_state(lazy->state());
    }
  }
}

TEST(SparseGrad, LazyEqualsDenseWhereTheRulesAgree) {
  // Without momentum and weight decay, SGD and Adagrad leave a zero-gradient row unchanged, so
  // lazy and dense agree over many steps.
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdagrad}) {
    OptimizerSpec spec;
    spec.kind = kind;
    Parameter sparse("t", random_tensor({kRows, kDim}, 11));
    Parameter dense("t", sparse.value().clone());
    sparse.set_sparse_grad(true);
    auto lazy = train::make_optimizer(spec, std::vector<Parameter>{sparse});
    auto full = train::make_optimizer(spec, std::vector<Parameter>{dense});
    for (int t = 0; t < 12; ++t) {
      sparse.zero_grad();
      dense.zero_grad();
      backward_through_lookup(sparse, step_grad(t));
      backward_through_lookup(dense, step_grad(t));
      lazy->step(0.1);
      full->step(0.1);
    }
    expect_near(sparse.value().to_float_vector(), dense.value().to_float_vector(),
                std::string(optimizer_kind_name(kind)));
  }
}

TEST(SparseGrad, DuplicateIdsAreSummedBeforeTheUpdate) {
  // Adagrad's s += g^2 tells (g1 + g2)^2 from g1^2 + g2^2: rows applied one by one would differ.
  OptimizerSpec spec;
  spec.kind = OptimizerKind::kAdagrad;
  Parameter sparse("t", Tensor::zeros({kRows, kDim}));
  Parameter dense("t", Tensor::zeros({kRows, kDim}));
  sparse.set_sparse_grad(true);
  auto lazy = train::make_optimizer(spec, std::vector<Parameter>{sparse});
  auto full = train::make_optimizer(spec, std::vector<Parameter>{dense});
  const std::vector<std::int32_t> ids{6, 6, 6, 1};
  const Tensor rows = Tensor::from_vector(
      {4, kDim}, std::vector<float>{1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3, 4, 5, -1, 0, 1, 2, 3});
  sparse.add_grad_rows(int_tensor({4}, ids), rows);
  dense.grad() = dense_of({ids, rows});
  lazy->step(1.0);
  full->step(1.0);
  expect_near(sparse.value().to_float_vector(), dense.value().to_float_vector(), "values");
  expect_near(lazy->state().at("adagrad/accumulator/t").to_float_vector(),
              full->state().at("adagrad/accumulator/t").to_float_vector(), "accumulator");
  // s = (3 * 1)^2 = 9 in row 6, column 0, not 3.
  EXPECT_FLOAT_EQ(lazy->state().at("adagrad/accumulator/t").to_float_vector()[6 * kDim], 9.0f);
}

TEST(SparseGrad, DenseModeReproducesTheDenseParameterExactly) {
  for (OptimizerSpec spec : specs()) {
    spec.sparse_update = SparseUpdate::kDense;
    Parameter sparse("t", random_tensor({kRows, kDim}, 5));
    Parameter dense("t", sparse.value().clone());
    sparse.set_sparse_grad(true);
    auto a = train::make_optimizer(spec, std::vector<Parameter>{sparse});
    auto b = train::make_optimizer(spec, std::vector<Parameter>{dense});
    for (int t = 0; t < 6; ++t) {
      a->zero_grad();
      b->zero_grad();
      backward_through_lookup(sparse, step_grad(t));
      backward_through_lookup(dense, step_grad(t));
      a->step(0.05);
      b->step(0.05);
    }
    EXPECT_EQ(sparse.value().to_float_vector(), dense.value().to_float_vector()) << spec.describe();
  }
}

TEST(SparseGrad, GlobalNormAndClippingOverSparseAndDenseGradients) {
  Parameter sparse("table", Tensor::zeros({kRows, kDim}));
  Parameter twin("table", Tensor::zeros({kRows, kDim}));
  Parameter w("w", Tensor::zeros({2, 3}));
  Parameter w_twin("w", Tensor::zeros({2, 3}));
  sparse.set_sparse_grad(true);
  const StepGrad g = step_grad(2);  // a duplicated row: its norm is of the sum
  sparse.add_grad_rows(int_tensor({std::int64_t(g.ids.size())}, g.ids), g.rows);
  twin.grad() = dense_of(g);
  const Tensor wg = random_tensor({2, 3}, 9, -3.0f, 3.0f);
  w.grad() = wg.clone();
  w_twin.grad() = wg.clone();
  const std::vector<Parameter> mixed{sparse, w};
  const std::vector<Parameter> dense{twin, w_twin};
  const double norm = train::grad_norm(dense);
  EXPECT_NEAR(train::grad_norm(mixed), norm, 1e-5 * norm);
  ASSERT_TRUE(sparse.grad_is_row_sparse());  // the norm did not densify
  EXPECT_NEAR(train::clip_grad_norm(mixed, norm / 4), norm, 1e-5 * norm);
  train::clip_grad_norm(dense, norm / 4);
  ASSERT_TRUE(sparse.grad_is_row_sparse());
  EXPECT_NEAR(train::grad_norm(mixed), norm / 4, 1e-5 * norm);
  expect_near(sparse.grad().to_float_vector(), twin.grad().to_float_vector(), "clipped table");
  expect_near(w.grad().to_float_vector(), w_twin.grad().to_float_vector(), "clipped w");
  // Clipping by value clamps the summed rows, as it clamps the dense gradient.
  sparse.zero_grad();
  twin.zero_grad();
  sparse.add_grad_rows(int_tensor({std::int64_t(g.ids.size())}, g.ids), g.rows);
  twin.grad() = dense_of(g);
  train::clip_grad_value(std::vector<Parameter>{sparse}, 1.5);
  train::clip_grad_value(std::vector<Parameter>{twin}, 1.5);
  ASSERT_TRUE(sparse.grad_is_row_sparse());
  EXPECT_EQ(sparse.grad().to_float_vector(), twin.grad().to_float_vector());
}

// A small model: word vectors (nn::Embedding) -> linear -> softmax cross-entropy, trained a
// few steps with sparse gradients and with dense ones. SGD without momentum or decay: the two
// must agree (lazy is exact there); the gradients of every parameter agree at every step.
TEST(SparseGrad, SmallModelTrainsTheSameSparseAndDense) {
  auto build = [](nn::ParameterStore& store, bool sparse_gradient) {
    return nn::Embedding(store, "embedding", 40, 6, {.sparse_gradient = sparse_gradient});
  };
  nn::ParameterStore store_a(21), store_b(21);
  nn::Embedding emb_a = build(store_a, true), emb_b = build(store_b, false);
  Parameter wa = store_a.create("fc/w", {6, 3}, nn::glorot_uniform());
  Parameter wb = store_b.create("fc/w", {6, 3}, nn::glorot_uniform());
  ASSERT_EQ(emb_a.table().value().to_float_vector(), emb_b.table().value().to_float_vector());
  OptimizerSpec spec;
  spec.kind = OptimizerKind::kSgd;
  auto opt_a = train::make_optimizer(spec, store_a.parameters());
  auto opt_b = train::make_optimizer(spec, store_b.parameters());
  for (int t = 0; t < 8; ++t) {
    std::vector<std::int32_t> ids, labels;
    for (int i = 0; i < 7; ++i) {
      ids.push_back((t * 7 + i * i) % 13);  // repeats within and across steps; rows >= 13 idle
      labels.push_back((t + i) % 3);
    }
    double losses[2];
    int side = 0;
    for (auto* m : {&emb_a, &emb_b}) {
      Parameter& w = m == &emb_a ? wa : wb;
      train::Optimizer& opt = m == &emb_a ? *opt_a : *opt_b;
      opt.zero_grad();
      Tape tape;
      TapeScope scope(tape);
      Var loss = mean(softmax_cross_entropy(matmul((*m)(int_tensor({7}, ids)), Var(w)),
                                            int_tensor({7}, labels)));
      tape.backward(loss);
      losses[side++] = loss.value().to_float_vector()[0];
    }
    EXPECT_EQ(losses[0], losses[1]) << "step " << t;
    ASSERT_TRUE(emb_a.table().grad_is_row_sparse());
    EXPECT_EQ(wa.grad().to_float_vector(), wb.grad().to_float_vector()) << "step " << t;
    opt_a->step(0.5);
    opt_b->step(0.5);
  }
  expect_near(emb_a.table().value().to_float_vector(), emb_b.table().value().to_float_vector(),
              "table");
  expect_near(wa.value().to_float_vector(), wb.value().to_float_vector(), "fc/w");
  // Rows no step used are the same on both sides, bit for bit (both untouched).
  const std::vector<float> a = emb_a.table().value().to_float_vector();
  const std::vector<float> b = emb_b.table().value().to_float_vector();
  EXPECT_EQ(std::vector<float>(a.begin() + 13 * 6, a.end()),
            std::vector<float>(b.begin() + 13 * 6, b.end()));
}

TEST(SparseGrad, StateRoundTripWithSparseUpdatesContinuesIdentically) {
  for (const OptimizerSpec& spec : specs()) {
    Parameter p1("embedding/table", random_tensor({kRows, kDim}, 13));
    p1.set_sparse_grad(true);
    auto first = train::make_optimizer(spec, std::vector<Parameter>{p1});
    for (int t = 0; t < 3; ++t) {
      first->zero_grad();
      backward_through_lookup(p1, step_grad(t));
      first->step(0.05);
    }
    const io::TensorMap state = first->state();
    Parameter p2("embedding/table", p1.value().clone());
    p2.set_sparse_grad(true);
    auto second = train::make_optimizer(spec, std::vector<Parameter>{p2});
    io::TensorMap saved;
    for (const auto& [name, tensor] : state) saved[name] = tensor.clone();
    second->load_state(saved);
    for (int t = 3; t < 7; ++t) {
      for (auto [p, opt] : {std::pair{&p1, first.get()}, std::pair{&p2, second.get()}}) {
        opt->zero_grad();
        backward_through_lookup(*p, step_grad(t));
        opt->step(0.05);
      }
    }
    EXPECT_EQ(p1.value().to_float_vector(), p2.value().to_float_vector()) << spec.describe();
  }
}

TEST(SparseGrad, RowUpdateChecksItsOperands) {
  Tensor value = Tensor::zeros({4, 2});
  backend::UpdateArgs args;
  expect_error(
      [&] {
        backend::apply_update_rows(args, value, int_tensor({2}, {1, 4}), Tensor::zeros({2, 2}),
                                   nullptr, nullptr);
      },
      {"[apply_update_rows] row index 4 at position 1 is outside [0, 4)"});
  expect_error(
      [&] {
        backend::apply_update_rows(args, value, int_tensor({2}, {1, 2}), Tensor::zeros({3, 2}),
                                   nullptr, nullptr);
      },
      {"[apply_update_rows] grad rows float32 [3, 2] must be float32 [2, 2]"});
}

}  // namespace
}  // namespace weft::testing
