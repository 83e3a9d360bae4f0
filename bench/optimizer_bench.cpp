// One optimizer step over the sentiment model's parameters (Tree-LSTM on SST, hidden 150: a
// 21,701 x 100 embedding and ~0.26M more, 2.43M floats in all), for each rule; the
// sentiment recipe is Adagrad with L2 decay and a 0.1 rate on the embedding. Part of
// weft_bench_ops; --benchmark_filter=optimizer_step selects these. Reports floats updated per
// second. Each rule also runs as optimizer_step_before/<rule>: the host update in double precision
// that train::Optimizer used before its float32 backend kernels (commit 73a775d, copied verbatim
// below), on the same tensors, so the speedup is a ratio measured in one process. And
// optimizer_batch/{dense,lazy}: zero_grad, a batch's gradient and one step of the sentiment
// recipe, with the table's gradient dense (the whole table filled and updated) or row-sparse
// (the rows of a batch of 25 SST trees, updated lazily).
#include <benchmark/benchmark.h>

#include <cmath>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "weft/core/rng.h"
#include "weft/train/optimizer.h"

namespace {

using weft::Parameter;
using weft::Shape;
using weft::Tensor;
using weft::train::OptimizerKind;
using weft::train::OptimizerSpec;

Tensor uniform(const Shape& shape, weft::Rng& rng) {
  std::vector<float> values(std::size_t(shape.numel()));
  for (float& v : values) v = rng.uniform(-0.1f, 0.1f);
  return Tensor::from_vector(shape, values);
}

// The sentiment model's parameters (models/sentiment.cpp at its default sizes), with gradients.
std::vector<Parameter> sentiment_parameters() {
  const std::vector<std::pair<const char*, Shape>> shapes = {{"embedding/table", {21701, 100}},
                                                             {"leaf/weight", {100, 300}},
                                                             {"leaf/bias", {300}},
                                                             {"composer/weight", {300, 750}},
                                                             {"composer/bias", {750}},
                                                             {"classifier/weight", {150, 5}},
                                                             {"classifier/bias", {5}}};
  weft::Rng rng(7);
  std::vector<Parameter> parameters;
  for (const auto& [name, shape] : shapes) {
    Parameter p(name, uniform(shape, rng));
    p.grad() = uniform(shape, rng);
    parameters.push_back(p);
  }
  return parameters;
}

void optimizer_step(benchmark::State& state, OptimizerSpec spec) {
  std::vector<Parameter> parameters = sentiment_parameters();
  auto optimizer = weft::train::make_optimizer(spec, parameters);
  std::int64_t floats = 0;
  for (const Parameter& p : parameters) floats += p.value().numel();
  for (auto _ : state) optimizer->step(1e-3);
  state.SetItemsProcessed(state.iterations() * floats);
}

// The per-step work of the previous train::Optimizer (src/train/optimizer.cpp at 73a775d) for
// CPU parameters: L2 decay into a scratch vector, decoupled decay, then the rule's loop in
// double over float storage.
class BeforeOptimizer {
 public:
  BeforeOptimizer(const OptimizerSpec& spec, std::vector<Parameter> parameters)
      : spec_(spec), parameters_(std::move(parameters)) {
    const int slots = spec.kind == OptimizerKind::kAdam
                          ? 2
                          : (spec.kind == OptimizerKind::kSgd && spec.momentum == 0 ? 0 : 1);
    for (const Parameter& p : parameters_) {
      std::vector<Tensor> s;
      for (int k = 0; k < slots; ++k)
        s.push_back(Tensor::full(p.shape(), spec.kind == OptimizerKind::kAdagrad
                                                ? float(spec.initial_accumulator)
                                                : 0.0f));
      slots_.push_back(std::move(s));
    }
  }

  void step(double learning_rate) {
    ++steps_;
    for (std::size_t i = 0; i < parameters_.size(); ++i)
      update_parameter(i, learning_rate * spec_.learning_rate_scale(parameters_[i].name()));
  }

 private:
  void update_parameter(std::size_t index, double learning_rate) {
    Parameter& p = parameters_[index];
    Tensor value = p.value();
    const Tensor grad_tensor = p.grad().to(weft::Device::kCpu);
    float* v = value.data<float>();
    const float* g = grad_tensor.data<float>();
    const std::int64_t n = value.numel();
    if (spec_.weight_decay > 0 && spec_.weight_decay_mode == weft::train::WeightDecayMode::kL2) {
      decayed_grad_.resize(std::size_t(n));
      for (std::int64_t i = 0; i < n; ++i)
        decayed_grad_[std::size_t(i)] = float(double(g[i]) + spec_.weight_decay * double(v[i]));
      g = decayed_grad_.data();
    }
    if (spec_.weight_decay > 0 &&
        spec_.weight_decay_mode == weft::train::WeightDecayMode::kDecoupled) {
      const double shrink = 1.0 - learning_rate * spec_.weight_decay;
      for (std::int64_t i = 0; i < n; ++i) v[i] = float(double(v[i]) * shrink);
    }
    std::vector<float*> slots;
    for (Tensor& slot : slots_[index]) slots.push_back(slot.data<float>());
    update(v, g, slots, n, learning_rate, steps_);
  }

  void update(float* value, const float* grad, std::span<float* const> slots, std::int64_t n,
              double lr, std::int64_t step) {
    if (spec_.kind == OptimizerKind::kSgd) {
      const double mu = spec_.momentum;
      if (mu == 0) {
        for (std::int64_t i = 0; i < n; ++i) value[i] = float(value[i] - lr * grad[i]);
        return;
      }
      float* velocity = slots[0];
      for (std::int64_t i = 0; i < n; ++i) {
        const double v = mu * velocity[i] + grad[i];
        velocity[i] = float(v);
        const double direction = spec_.nesterov ? grad[i] + mu * v : v;
        value[i] = float(value[i] - lr * direction);
      }
    } else if (spec_.kind == OptimizerKind::kAdagrad) {
      float* sum = slots[0];
      for (std::int64_t i = 0; i < n; ++i) {
        const double s = double(sum[i]) + double(grad[i]) * grad[i];
        sum[i] = float(s);
        value[i] = float(value[i] - lr * grad[i] / (std::sqrt(s) + spec_.epsilon));
      }
    } else {
      const double b1 = spec_.beta1, b2 = spec_.beta2, eps = spec_.epsilon;
      const double correction1 = 1.0 - std::pow(b1, double(step));
      const double correction2 = 1.0 - std::pow(b2, double(step));
      float* m = slots[0];
      float* v = slots[1];
      for (std::int64_t i = 0; i < n; ++i) {
        const double g = grad[i];
        const double mi = b1 * m[i] + (1 - b1) * g;
        const double vi = b2 * v[i] + (1 - b2) * g * g;
        m[i] = float(mi);
        v[i] = float(vi);
        value[i] = float(value[i] - lr * (mi / correction1) / (std::sqrt(vi / correction2) + eps));
      }
    }
  }

  OptimizerSpec spec_;
  std::vector<Parameter> parameters_;
  std::vector<std::vector<Tensor>> slots_;
  std::vector<float> decayed_grad_;
  std::int64_t steps_ = 0;
};

void optimizer_step_before(benchmark::State& state, OptimizerSpec spec) {
  std::vector<Parameter> parameters = sentiment_parameters();
  BeforeOptimizer optimizer(spec, parameters);
  std::int64_t floats = 0;
  for (const Parameter& p : parameters) floats += p.value().numel();
  for (auto _ : state) optimizer.step(1e-3);
  state.SetItemsProcessed(state.iterations() * floats);
}

OptimizerSpec spec_of(OptimizerKind kind, double momentum = 0, double weight_decay = 0) {
  OptimizerSpec spec;
  spec.kind = kind;
  spec.momentum = momentum;
  spec.weight_decay = weight_decay;
  return spec;
}

OptimizerSpec sentiment_recipe() {
  OptimizerSpec spec = spec_of(OptimizerKind::kAdagrad, 0, 1e-4);
  spec.learning_rate_scales = {{"embedding/", 0.1}};
  return spec;
}

// A batch of 25 SST trees reads ~480 word ids, ~290 of them distinct (the mean over a shuffled
// epoch of SST train); drawn here with a skew towards low ids, 443 distinct (more rows than a
// real batch, so the lazy figure errs on the slow side).
void optimizer_batch(benchmark::State& state, bool sparse) {
  std::vector<Parameter> parameters = sentiment_parameters();
  Parameter& table = parameters[0];
  table.set_sparse_grad(sparse);
  auto optimizer = weft::train::make_optimizer(sentiment_recipe(), parameters);
  weft::Rng rng(11);
  std::vector<std::int32_t> ids(480);
  for (std::int32_t& id : ids) {
    const float u = rng.uniform(0.0f, 1.0f);
    id = std::int32_t(float(21701 - 1) * u * u * u);
  }
  const Tensor id_tensor = Tensor::from_vector(Shape{std::int64_t(ids.size())}, ids);
  const Tensor rows = uniform(Shape{std::int64_t(ids.size()), 100}, rng);
  for (auto _ : state) {
    optimizer->zero_grad();
    if (sparse) table.add_grad_rows(id_tensor, rows);  // the dense side's scatter is ~0.1% of it
    optimizer->step(1e-3);
  }
  state.counters["distinct_rows"] = double(std::set<std::int32_t>(ids.begin(), ids.end()).size());
}

BENCHMARK_CAPTURE(optimizer_batch, dense, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(optimizer_batch, lazy, true)->Unit(benchmark::kMillisecond);

#define WEFT_OPTIMIZER_BENCH(name, spec)                                        \
  BENCHMARK_CAPTURE(optimizer_step, name, spec)->Unit(benchmark::kMillisecond); \
  BENCHMARK_CAPTURE(optimizer_step_before, name, spec)->Unit(benchmark::kMillisecond)

WEFT_OPTIMIZER_BENCH(sgd, spec_of(OptimizerKind::kSgd));
WEFT_OPTIMIZER_BENCH(sgd_momentum, spec_of(OptimizerKind::kSgd, 0.9));
WEFT_OPTIMIZER_BENCH(adagrad_sentiment_recipe, sentiment_recipe());
WEFT_OPTIMIZER_BENCH(adam, spec_of(OptimizerKind::kAdam));

}  // namespace
