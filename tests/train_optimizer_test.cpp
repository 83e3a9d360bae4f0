// Optimizers (float32 backend kernels) against a float64 reference written here from the
// textbook update rules, over several steps with varying gradients and learning rates, on
// small parameters and on one that spans several kernel chunks; a few literal hand-computed
// steps; gradient clipping by norm and by value; the state round trip and its error messages.
// Everything here runs with parameters on Device::kCpu (tests/cuda_optimizer_test.cpp compares
// the CUDA kernels with these).
#include "weft/train/optimizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "op_test_util.h"

namespace weft::testing {
namespace {

using ::testing::HasSubstr;
using train::OptimizerKind;
using train::OptimizerSpec;
using train::WeightDecayMode;

constexpr int kSteps = 5;

// A deterministic gradient for parameter element i at step t (float, as the tape makes).
float gradient_at(int t, std::size_t i) {
  return float(std::sin(0.7 * double(t + 1) + 1.3 * double(i)) * (1.0 + 0.5 * double(t)));
}

double learning_rate_at(int t) { return 0.05 + 0.01 * t; }

// The float64 reference of one optimizer over kSteps steps from `p` (one flat parameter), at
// lr_scale times the learning rates.
std::vector<double> reference(const OptimizerSpec& s, std::vector<double> p,
                              double lr_scale = 1.0) {
  const std::size_t n = p.size();
  std::vector<double> a(n, s.kind == OptimizerKind::kAdagrad ? s.initial_accumulator : 0.0);
  std::vector<double> b(n, 0.0);
  for (int t = 0; t < kSteps; ++t) {
    const double lr = lr_scale * learning_rate_at(t);
    for (std::size_t i = 0; i < n; ++i) {
      double g = gradient_at(t, i);
      if (s.weight_decay_mode == WeightDecayMode::kL2) g += s.weight_decay * p[i];
      if (s.weight_decay_mode == WeightDecayMode::kDecoupled) p[i] -= lr * s.weight_decay * p[i];
      if (s.kind == OptimizerKind::kSgd) {
        a[i] = s.momentum * a[i] + g;
        const double d = s.momentum == 0 ? g : (s.nesterov ? g + s.momentum * a[i] : a[i]);
        p[i] -= lr * d;
      } else if (s.kind == OptimizerKind::kAdagrad) {
        a[i] += g * g;
        p[i] -= lr * g / (std::sqrt(a[i]) + s.epsilon);
      } else {
        a[i] = s.beta1 * a[i] + (1 - s.beta1) * g;
        b[i] = s.beta2 * b[i] + (1 - s.beta2) * g * g;
        const double m_hat = a[i] / (1 - std::pow(s.beta1, t + 1));
        const double v_hat = b[i] / (1 - std::pow(s.beta2, t + 1));
        p[i] -= lr * m_hat / (std::sqrt(v_hat) + s.epsilon);
      }
    }
  }
  return p;
}

void set_grad(Parameter& p, int t, std::size_t offset) {
  float* g = p.grad().data<float>();
  for (std::int64_t i = 0; i < p.value().numel(); ++i)
    g[i] = gradient_at(t, offset + std::size_t(i));
}

// Runs the optimizer on two parameters (6 + 4 values, seen as one flat vector by the
// reference) plus a frozen one, and compares every value after kSteps steps.
void expect_matches_reference(const OptimizerSpec& spec) {
  const std::vector<float> init{0.5f, -1.25f, 2.0f, 0.0f, 0.75f, -0.3f, 1.5f, -2.0f, 0.1f, 0.9f};
  Parameter w("w", Tensor::from_vector({2, 3}, std::vector<float>(init.begin(), init.begin() + 6)));
  Parameter b("b", Tensor::from_vector({4}, std::vector<float>(init.begin() + 6, init.end())));
  Parameter frozen("frozen", Tensor::full({3}, 7.0f), /*trainable=*/false);
  auto optimizer = train::make_optimizer(spec, std::vector<Parameter>{w, frozen, b, w});
  ASSERT_EQ(optimizer->parameters().size(), 2u);  // frozen dropped, w once
  for (int t = 0; t < kSteps; ++t) {
    set_grad(w, t, 0);
    set_grad(b, t, 6);
    set_grad(frozen, t, 0);
    optimizer->step(learning_rate_at(t));
  }
  const std::vector<double> expected =
      reference(spec, std::vector<double>(init.begin(), init.end()));
  std::vector<float> got = w.value().to_float_vector();
  const std::vector<float> got_b = b.value().to_float_vector();
  got.insert(got.end(), got_b.begin(), got_b.end());
  // float32 arithmetic over a few steps: a few float roundings from the float64 reference.
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(got[i], expected[i], 4e-6 * (1 + std::abs(expected[i])))
        << spec.describe() << " element " << i;
  EXPECT_EQ(frozen.value().to_float_vector(), std::vector<float>(3, 7.0f));
  EXPECT_EQ(optimizer->steps(), kSteps);
}

// A parameter of 5,000 values (the CPU kernel works in chunks of 2,048: two whole ones and a
// tail) on an explicit Device::kCpu, with a learning-rate scale, against the reference.
void expect_large_matches_reference(OptimizerSpec spec) {
  const std::int64_t n = 5000;
  const Tensor init = random_tensor({n}, 11);
  Parameter w("layer/w", init.to(Device::kCpu).clone());
  ASSERT_EQ(w.value().device(), Device::kCpu);
  spec.learning_rate_scales = {{"layer/", 0.5}};
  auto optimizer = train::make_optimizer(spec, std::vector<Parameter>{w});
  for (int t = 0; t < kSteps; ++t) {
    set_grad(w, t, 0);
    optimizer->step(learning_rate_at(t));
  }
  const std::vector<float> start = init.to_float_vector();
  const std::vector<double> expected = reference(spec, {start.begin(), start.end()}, 0.5);
  const std::vector<float> got = w.value().to_float_vector();
  for (std::size_t i = 0; i < expected.size(); ++i)
    ASSERT_NEAR(got[i], expected[i], 4e-6 * (1 + std::abs(expected[i])))
        << spec.describe() << " element " << i;
  for (const auto& [name, tensor] : optimizer->state())
    EXPECT_EQ(tensor.device(), Device::kCpu) << name;
}

TEST(TrainOptimizer, LargeParameterMatchesReferenceForEveryRule) {
  OptimizerSpec spec;
  expect_large_matches_reference(spec);  // SGD
  spec.momentum = 0.9;
  expect_large_matches_reference(spec);
  spec.nesterov = true;
  spec.weight_decay = 0.1;
  expect_large_matches_reference(spec);
  spec = {};
  spec.kind = OptimizerKind::kAdagrad;
  spec.initial_accumulator = 0.1;
  spec.weight_decay = 1e-2;
  expect_large_matches_reference(spec);
  spec = {};
  spec.kind = OptimizerKind::kAdam;
  expect_large_matches_reference(spec);
  spec.weight_decay = 0.05;
  spec.weight_decay_mode = WeightDecayMode::kDecoupled;  // AdamW
  expect_large_matches_reference(spec);
}

TEST(TrainOptimizer, SgdMatchesReference) {
  OptimizerSpec spec;
  expect_matches_reference(spec);
  spec.momentum = 0.9;
  expect_matches_reference(spec);
  spec.nesterov = true;
  expect_matches_reference(spec);
  spec.weight_decay = 0.1;
  expect_matches_reference(spec);
  spec.weight_decay_mode = WeightDecayMode::kDecoupled;
  expect_matches_reference(spec);
}

TEST(TrainOptimizer, AdagradMatchesReference) {
  OptimizerSpec spec;
  spec.kind = OptimizerKind::kAdagrad;
  spec.epsilon = 1e-10;
  expect_matches_reference(spec);
  spec.initial_accumulator = 0.1;
  spec.weight_decay = 0.05;
  expect_matches_reference(spec);
}

TEST(TrainOptimizer, AdamMatchesReference) {
  OptimizerSpec spec;
  spec.kind = OptimizerKind::kAdam;
  expect_matches_reference(spec);
  spec.beta1 = 0.8;
  spec.beta2 = 0.95;
  spec.epsilon = 1e-3;
  spec.weight_decay = 0.2;  // L2, added to the gradient
  expect_matches_reference(spec);
  spec.weight_decay_mode = WeightDecayMode::kDecoupled;  // AdamW
  expect_matches_reference(spec);
}

TEST(TrainOptimizer, HandComputedSteps) {
  // SGD, momentum 0.9, lr 0.1, g = 0.5 twice: v = 0.5, p = 0.95; v = 0.95, p = 0.855.
  Parameter p("p", Tensor::from_vector({1}, std::vector<float>{1.0f}));
  OptimizerSpec sgd;
  sgd.momentum = 0.9;
  auto optimizer = train::make_optimizer(sgd, std::vector<Parameter>{p});
  p.grad().data<float>()[0] = 0.5f;
  optimizer->step(0.1);
  EXPECT_FLOAT_EQ(p.value().item(), 0.95f);
  optimizer->step(0.1);
  EXPECT_FLOAT_EQ(p.value().item(), 0.855f);
  EXPECT_FLOAT_EQ(optimizer->state().at("sgd/velocity/p").item(), 0.95f);
  // Adam's first step moves by lr * g / (|g| + eps): 1 - 0.1 * 4 / (4 + 1e-8), whatever |g|.
  Parameter q("q", Tensor::from_vector({1}, std::vector<float>{1.0f}));
  OptimizerSpec adam;
  adam.kind = OptimizerKind::kAdam;
  auto optimizer2 = train::make_optimizer(adam, std::vector<Parameter>{q});
  q.grad().data<float>()[0] = 4.0f;
  optimizer2->step(0.1);
  EXPECT_FLOAT_EQ(q.value().item(), 0.9f);
  // zero_grad resets every trainable gradient.
  optimizer2->zero_grad();
  EXPECT_EQ(q.grad().to_float_vector(), std::vector<float>{0.0f});
}

TEST(TrainOptimizer, LearningRateScalesByNamePrefix) {
  // Plain SGD, lr 0.1, g = 1: "embedding/table" moves at 0.1 x 0.1, "embedding2" and "fc/w"
  // at the full rate (the first matching prefix wins; "embedding/" does not match "embedding2").
  Parameter table("embedding/table", Tensor::from_vector({1}, std::vector<float>{1.0f}));
  Parameter other("embedding2", Tensor::from_vector({1}, std::vector<float>{1.0f}));
  Parameter weight("fc/w", Tensor::from_vector({1}, std::vector<float>{1.0f}));
  OptimizerSpec sgd;
  sgd.learning_rate_scales = {{"embedding/", 0.1}, {"fc/", 1.0}};
  auto optimizer = train::make_optimizer(sgd, std::vector<Parameter>{table, other, weight});
  for (Parameter* p : {&table, &other, &weight}) p->grad().data<float>()[0] = 1.0f;
  optimizer->step(0.1);
  EXPECT_FLOAT_EQ(table.value().item(), 0.99f);
  EXPECT_FLOAT_EQ(other.value().item(), 0.9f);
  EXPECT_FLOAT_EQ(weight.value().item(), 0.9f);
  EXPECT_THAT(sgd.describe(), HasSubstr("lr_scale[embedding/]=0.1"));
  sgd.learning_rate_scales = {{"x", -1.0}};
  EXPECT_THAT([&] { sgd.validate(); },
              ::testing::ThrowsMessage<Error>(HasSubstr("learning-rate scale of 'x'")));
}

TEST(TrainOptimizer, ClipGradNormScalesAllGradients) {
  Parameter a("a", Tensor::zeros({2}));
  Parameter b("b", Tensor::zeros({1}));
  Parameter frozen("frozen", Tensor::zeros({1}), false);
  a.grad() = Tensor::from_vector({2}, std::vector<float>{3, 4});
  b.grad() = Tensor::from_vector({1}, std::vector<float>{12});
  frozen.grad() = Tensor::from_vector({1}, std::vector<float>{100});
  const std::vector<Parameter> all{a, b, frozen};
  EXPECT_DOUBLE_EQ(train::grad_norm(all), 13.0);
  EXPECT_DOUBLE_EQ(train::clip_grad_norm(all, 20.0), 13.0);  // below the limit: unchanged
  EXPECT_EQ(a.grad().to_float_vector(), (std::vector<float>{3, 4}));
  EXPECT_DOUBLE_EQ(train::clip_grad_norm(all, 6.5), 13.0);
  EXPECT_EQ(a.grad().to_float_vector(), (std::vector<float>{1.5f, 2.0f}));
  EXPECT_EQ(b.grad().to_float_vector(), (std::vector<float>{6.0f}));
  EXPECT_EQ(frozen.grad().to_float_vector(), (std::vector<float>{100.0f}));
  EXPECT_NEAR(train::grad_norm(all), 6.5, 1e-6);
  expect_error([&] { train::clip_grad_norm(all, 0); },
               {"[clip_grad_norm] max_norm must be > 0, got 0"});
}

TEST(TrainOptimizer, ClipGradValueClampsElements) {
  Parameter a("a", Tensor::zeros({4}));
  a.grad() = Tensor::from_vector({4}, std::vector<float>{-3, 0.5f, 7, -0.25f});
  train::clip_grad_value(std::vector<Parameter>{a}, 1.0);
  EXPECT_EQ(a.grad().to_float_vector(), (std::vector<float>{-1, 0.5f, 1, -0.25f}));
  expect_error([&] { train::clip_grad_value(std::vector<Parameter>{a}, -1); },
               {"[clip_grad_value] limit must be > 0"});
}

// Steps with the same gradients from two optimizers must stay bitwise equal.
void step_both(train::Optimizer& x, Parameter& px, train::Optimizer& y, Parameter& py, int t) {
  set_grad(px, t, 0);
  set_grad(py, t, 0);
  x.step(0.01);
  y.step(0.01);
}

TEST(TrainOptimizer, StateRoundTripContinuesIdentically) {
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdagrad, OptimizerKind::kAdam}) {
    OptimizerSpec spec;
    spec.kind = kind;
    spec.momentum = kind == OptimizerKind::kSgd ? 0.9 : 0.0;
    Parameter p1("layer/w", random_tensor({3, 2}, 1));
    auto first = train::make_optimizer(spec, std::vector<Parameter>{p1});
    for (int t = 0; t < 3; ++t) {
      set_grad(p1, t, 0);
      first->step(0.01);
    }
    const io::TensorMap state = first->state();
    const std::string kind_name(first->kind_name());
    EXPECT_EQ(state.at(kind_name + "/step").to_int_vector(), std::vector<std::int32_t>{3});
    EXPECT_EQ(state.size(), kind == OptimizerKind::kAdam ? 3u : 2u);
    Parameter p2("layer/w", p1.value().clone());
    auto second = train::make_optimizer(spec, std::vector<Parameter>{p2});
    second->load_state(state);
    EXPECT_EQ(second->steps(), 3);
    for (int t = 3; t < 6; ++t) step_both(*first, p1, *second, p2, t);
    EXPECT_EQ(p1.value().to_float_vector(), p2.value().to_float_vector()) << kind_name;
  }
}

TEST(TrainOptimizer, LoadStateNamesEveryMismatch) {
  OptimizerSpec adam;
  adam.kind = OptimizerKind::kAdam;
  Parameter w("w", Tensor::zeros({2, 3}));
  Parameter b("b", Tensor::zeros({3}));
  auto optimizer = train::make_optimizer(adam, std::vector<Parameter>{w, b});
  io::TensorMap state = optimizer->state();
  state["adam/m/w"] = Tensor::zeros({3, 2});
  state.erase("adam/v/b");
  state["adam/v/extra"] = Tensor::zeros({1});
  expect_error([&] { optimizer->load_state(state, "resume"); },
               {"[resume] optimizer state 'adam/m/w' has shape [3, 2] in the file but [2, 3] "
                "in this adam optimizer",
                "missing optimizer states (in this adam optimizer, not in the file): 'adam/v/b'",
                "unexpected optimizer states (in the file, not in this adam optimizer): "
                "'adam/v/extra'"});
  EXPECT_EQ(optimizer->steps(), 0);
}

TEST(TrainOptimizer, SpecErrors) {
  OptimizerSpec spec;
  spec.momentum = 1.5;
  expect_error([&] { spec.validate(); }, {"[optimizer] momentum must be in [0, 1), got 1.5"});
  spec = {};
  spec.nesterov = true;
  expect_error([&] { spec.validate(); }, {"nesterov needs a momentum > 0"});
  expect_error([] { train::parse_optimizer_kind("rmsprop"); },
               {"unknown optimizer 'rmsprop'; expected sgd, adagrad or adam"});
  EXPECT_EQ(train::parse_weight_decay_mode("decoupled"), WeightDecayMode::kDecoupled);
  Parameter a("same", Tensor::zeros({1}));
  Parameter b("same", Tensor::zeros({1}));
  expect_error(
      [&] {
        train::make_optimizer({}, std::vector<Parameter>{a, b});
      },
      {"two different parameters are named 'same'"});
  auto optimizer = train::make_optimizer({}, std::vector<Parameter>{a});
  expect_error([&] { optimizer->step(std::nan("")); }, {"the learning rate must be finite"});
  OptimizerSpec adam;
  adam.kind = OptimizerKind::kAdam;
  auto adam_optimizer = train::make_optimizer(adam, std::vector<Parameter>{a});
  a.value() = Tensor::zeros({2});
  expect_error([&] { adam_optimizer->step(0.1); },
               {"[optimizer] parameter 'same' is [2] with gradient [1] but was [1] when the "
                "optimizer was made"});
}

}  // namespace
}  // namespace weft::testing
