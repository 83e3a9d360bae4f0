// `weft demo`: the tensor engine and autodiff on their own, without blocks or the loom. Trains
// linear → tanh → linear → softmax cross-entropy with plain SGD on two interleaved spirals (a
// seeded synthetic task no linear model can solve), printing loss, accuracy and throughput per
// epoch.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <span>
#include <utility>
#include <vector>

#include "commands.h"
#include "weft/autodiff/ops.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/core/rng.h"

namespace weft::tool {
namespace {

// Points of two spirals wound into each other; class c is the spiral rotated by c·π.
struct Dataset {
  std::vector<float> features;  // [n, 2]
  std::vector<std::int32_t> labels;
  std::int64_t size() const { return std::int64_t(labels.size()); }
};

Dataset make_spirals(std::int64_t n, Rng& rng) {
  constexpr double kTurns = 1.25;
  constexpr double kNoise = 0.06;
  // Inputs of a few units: at radius 1 the Glorot-initialised tanh layer is nearly linear
  // over the data, and SGD needs hundreds of epochs to bend it round the spirals.
  constexpr double kRadius = 4.0;
  Dataset data;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto label = std::int32_t(rng.below(2));
    const double r = 0.1 + 0.9 * double(rng.uniform());
    const double angle = 2 * std::numbers::pi * kTurns * r + std::numbers::pi * label;
    data.features.push_back(float(kRadius * (r * std::cos(angle) + kNoise * rng.normal())));
    data.features.push_back(float(kRadius * (r * std::sin(angle) + kNoise * rng.normal())));
    data.labels.push_back(label);
  }
  return data;
}

// Uniform in ±sqrt(6 / (fan_in + fan_out)) (Glorot), keeping tanh out of saturation at start.
Parameter glorot(const char* name, std::int64_t in, std::int64_t out, Rng& rng) {
  const float limit = float(std::sqrt(6.0 / double(in + out)));
  std::vector<float> values(std::size_t(in * out));
  for (float& v : values) v = rng.uniform(-limit, limit);
  return Parameter(name, Tensor::from_vector({in, out}, values));
}

struct Mlp {
  Parameter w1, b1, w2, b2;

  Mlp(std::int64_t hidden, Rng& rng)
      : w1(glorot("w1", 2, hidden, rng)),
        b1("b1", Tensor::zeros({hidden})),
        w2(glorot("w2", hidden, 2, rng)),
        b2("b2", Tensor::zeros({2})) {}

  Var logits(Var x) const { return linear(tanh(linear(x, w1, b1)), w2, b2); }
  std::vector<Parameter> parameters() const { return {w1, b1, w2, b2}; }
};

// Rows `order[begin, end)` of the data as a feature tensor and a label tensor.
std::pair<Tensor, Tensor> batch(const Dataset& data, std::span<const std::int64_t> rows) {
  std::vector<float> x;
  std::vector<std::int32_t> y;
  x.reserve(rows.size() * 2);
  y.reserve(rows.size());
  for (std::int64_t row : rows) {
    x.push_back(data.features[std::size_t(2 * row)]);
    x.push_back(data.features[std::size_t(2 * row + 1)]);
    y.push_back(data.labels[std::size_t(row)]);
  }
  const auto n = std::int64_t(rows.size());
  return {Tensor::from_vector({n, 2}, x), Tensor::from_vector({n}, y)};
}

std::int64_t count_correct(const Tensor& logits, const Tensor& labels) {
  const std::vector<float> z = logits.to_float_vector();
  const std::vector<std::int32_t> y = labels.to_int_vector();
  std::int64_t correct = 0;
  for (std::size_t i = 0; i < y.size(); ++i)
    correct += (z[2 * i + 1] > z[2 * i] ? 1 : 0) == y[i] ? 1 : 0;
  return correct;
}

double accuracy(const Mlp& model, const Dataset& data) {
  Tape tape;
  TapeScope scope(tape);
  tape.set_grad_enabled(false);
  std::vector<std::int64_t> rows(std::size_t(data.size()));
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = std::int64_t(i);
  auto [x, y] = batch(data, rows);
  return double(count_correct(model.logits(tape.constant(x)).value(), y)) / double(data.size());
}

// value -= learning_rate * grad, then the gradient is reset for the next step.
void sgd_step(std::span<Parameter> parameters, float learning_rate) {
  for (Parameter& p : parameters) {
    float* value = p.value().data<float>();
    const float* grad = p.grad().data<float>();
    for (std::int64_t i = 0; i < p.value().numel(); ++i) value[i] -= learning_rate * grad[i];
    p.zero_grad();
  }
}

}  // namespace

CLI::App* add_demo(CLI::App& app, DemoOptions& demo) {
  CLI::App* cmd =
      app.add_subcommand("demo", "Train a small MLP on two interleaved spirals (the engine demo)");
  cmd->add_option("--epochs", demo.epochs, "Passes over the training set")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--seed", demo.seed, "Seed of the data and the initial weights")
      ->capture_default_str();
  cmd->add_option("--threads", demo.threads, "GEMM threads (0: the backend's default)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--batch-size", demo.batch_size, "Examples per SGD step")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--hidden", demo.hidden, "Hidden units")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--learning-rate", demo.learning_rate, "SGD step size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--examples", demo.examples, "Training examples")
      ->capture_default_str()
      ->check(CLI::Range(2, 10000000));
  return cmd;
}

int run_demo(const DemoOptions& options) {
  if (options.threads > 0) set_num_threads(options.threads);
  Rng rng(options.seed);
  const Dataset train = make_spirals(options.examples, rng);
  const Dataset test = make_spirals(std::max<std::int64_t>(options.examples / 4, 1), rng);
  Mlp model(options.hidden, rng);
  std::vector<Parameter> parameters = model.parameters();

  fmt::print("weft demo: 2-D spirals, {} train / {} test, MLP 2-{}-2, SGD lr {} batch {}\n",
             train.size(), test.size(), options.hidden, options.learning_rate, options.batch_size);
  std::vector<std::int64_t> order(std::size_t(train.size()));
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = std::int64_t(i);
  Tape tape;
  for (int epoch = 1; epoch <= options.epochs; ++epoch) {
    for (std::size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
    const auto start = std::chrono::steady_clock::now();
    double loss_sum = 0;
    std::int64_t correct = 0;
    for (std::size_t begin = 0; begin < order.size(); begin += std::size_t(options.batch_size)) {
      const std::size_t count = std::min(order.size() - begin, std::size_t(options.batch_size));
      auto [x, y] = batch(train, std::span(order).subspan(begin, count));
      tape.clear();
      TapeScope scope(tape);
      Var logits = model.logits(tape.constant(x));
      Var loss = mean(softmax_cross_entropy(logits, y));
      tape.backward(loss);
      sgd_step(parameters, options.learning_rate);
      loss_sum += double(loss.value().item()) * double(count);
      correct += count_correct(logits.value(), y);
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print("epoch {:3d}  loss {:.4f}  train acc {:5.1f}%  test acc {:5.1f}%  {:9.0f} ex/s\n",
               epoch, loss_sum / double(train.size()),
               100.0 * double(correct) / double(train.size()), 100.0 * accuracy(model, test),
               double(train.size()) / seconds);
  }
  fmt::print("final test accuracy: {:.1f}% (chance: 50%)\n", 100.0 * accuracy(model, test));
  fmt::print("backend: {}\n", cpu_backend_summary());
  return 0;
}

}  // namespace weft::tool
