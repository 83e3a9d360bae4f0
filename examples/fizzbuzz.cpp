// The original's fizzbuzz example with blocks: a Fold reads a number's decimal digits
// ((accumulator, digit one-hot) -> two FC layers) and a softmax layer says number / fizz / buzz /
// fizzbuzz. Trains with Adam on a seeded 90% of 1..9999 and prints held-out accuracy.
//   fizzbuzz [epochs, default 25]
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>

#include "weft/autodiff/ops.h"
#include "weft/blocks/compiler.h"
#include "weft/nn/fc.h"
#include "weft/nn/parameter_store.h"
#include "weft/train/metrics.h"
#include "weft/train/optimizer.h"

using namespace weft;
using namespace weft::blocks;

int main(int argc, char** argv) {
  const int epochs = argc > 1 ? std::atoi(argv[1]) : 25;
  const char* names[] = {"number", "fizz", "buzz", "fizzbuzz"};
  auto example = [](int n) {
    Input digits = Input::array();
    for (char c : std::to_string(n)) digits.push_back(c - '0');
    return Input{{"digits", digits}, {"label", (n % 3 == 0) + 2 * (n % 5 == 0)}};
  };
  // ---- The model: a Fold over one-hot digits, then a classifier ----------------------------
  const std::int64_t H = 64;
  nn::ParameterStore store(1);
  nn::FC mix(store, "mix", H + 10, 2 * H), step(store, "step", 2 * H, H);  // relu, relu
  nn::FC out(store, "out", H, 4, nn::FCOptions{.activation = nn::Activation::kNone});
  Function cell("cell", {Type::vector(H), Type::vector(10)}, [&](std::span<const Var> in) {
    return step(mix(concat({in[0], in[1]})));
  });
  Function classify("classify", {Type::vector(H)},
                    [&](std::span<const Var> in) { return out(in[0]); });
  Composition model("fizzbuzz");
  auto logits = model.add(
      GetItem("digits") >> Map(OneHot(10)) >> Fold(cell, Zeros(Type::vector(H))) >> classify,
      model.input());
  model.add(Metric("logits"), {logits, model.add(GetItem("label"), model.input())});
  model.set_output(logits);
  Compiler compiler(model);
  // ---- Data and training -------------------------------------------------------------------
  std::vector<Input> train, test;
  std::mt19937 rng(1);
  for (int n = 1; n < 10000; ++n) (rng() % 10 == 0 ? test : train).push_back(example(n));
  auto optimizer = train::make_optimizer({.kind = train::OptimizerKind::kAdam}, store.parameters());
  Tape tape;
  auto run = [&](std::span<const Input> batch, bool learn) {  // -> {loss, hits}
    tape.clear();
    tape.set_grad_enabled(learn);
    TapeScope scope(tape);
    MetricValues rows = compiler.forward(batch, tape).metric("logits");
    std::vector<std::int32_t> labels;
    for (const Input& l : rows.labels) labels.push_back(l.get<std::int32_t>());
    const Tensor y = Tensor::from_vector({std::int64_t(labels.size())}, labels);
    Var loss = mean(softmax_cross_entropy(rows.values, y));
    if (learn) {
      optimizer->zero_grad();
      tape.backward(loss);
      optimizer->step(0.002);
    }
    return std::pair{loss.value().item(), train::argmax_hits(rows.values.value(), y)};
  };
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    std::shuffle(train.begin(), train.end(), rng);
    double loss = 0, batches = 0;
    for (std::size_t i = 0; i < train.size(); i += 64, ++batches) {
      loss +=
          run(std::span(train).subspan(i, std::min<std::size_t>(64, train.size() - i)), true).first;
    }
    std::printf("epoch %2d  train loss %.4f  held-out accuracy %.4f (%zu numbers)\n", epoch,
                loss / batches, double(run(test, false).second) / double(test.size()), test.size());
  }
  for (int n = 1; n <= 15; ++n) {  // the classic output, predicted
    const Input x = example(n);
    const std::vector<float> row =
        compiler.forward({&x, 1}, tape).output(0).value().to_float_vector();
    std::printf("%s%s", n == 1 ? "" : " ",
                names[std::max_element(row.begin(), row.end()) - row.begin()]);
  }
  std::printf("\n");
}
