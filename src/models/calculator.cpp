// The calculator Tree-RNN with blocks: the model definition (make_blocks), its batches and its
// predictions. Examples are {"expression": <expression>, "sign": label}.
#include "weft/models/calculator.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "weft/autodiff/ops.h"
#include "weft/blocks/compiler.h"
#include "weft/core/error.h"
#include "weft/models/blocks_runner.h"
#include "weft/nn/embedding.h"
#include "weft/nn/fc.h"
#include "weft/nn/parameter_store.h"

namespace weft::models {

using blocks::Block;
using blocks::Function;
using blocks::Type;
using nlohmann::json;

namespace {

constexpr int kClasses = 3;
constexpr std::array<const char*, kClasses> kSignNames{"negative", "zero", "positive"};
constexpr std::array<const char*, 3> kOps{"+", "-", "*"};

json make_example(const CalculatorExample& example) {
  return json{{"expression", example.expression}, {"sign", std::int32_t(example.label)}};
}

}  // namespace

struct CalculatorModel::Impl {
  CalculatorOptions options;
  std::vector<json> train, dev, test;
  nn::ParameterStore store;
  std::unique_ptr<nn::Embedding> digits;
  std::vector<std::unique_ptr<nn::FC>> combiners;  // one per operator, in kOps order
  std::unique_ptr<nn::FC> classifier;
  Block expression;  // kept alive: the forward declaration's references hold it weakly
  BlocksRunner runner;

  explicit Impl(CalculatorOptions opts) : options(std::move(opts)), store(options.seed) {
    // One random stream per split, so dev and test do not depend on the training set's size.
    std::uint64_t stream = 0;
    for (auto* split : {&train, &dev, &test}) {
      Rng rng(mix64(options.seed, stream++));
      const std::int64_t count = split == &train ? options.train_examples : options.eval_examples;
      for (const CalculatorExample& e : make_calculator_examples(count, rng, options.data)) {
        split->push_back(make_example(e));
      }
    }
    const std::int64_t n = options.hidden;
    digits = std::make_unique<nn::Embedding>(store, "digit", 10, n);
    for (const char* op : kOps) {
      combiners.push_back(std::make_unique<nn::FC>(store, std::string("op") + op, 2 * n, n));
    }
    classifier = std::make_unique<nn::FC>(store, "classifier", n, kClasses,
                                          nn::FCOptions{.activation = nn::Activation::kNone});
    runner.compile(make_blocks());
  }

  Block make_blocks() {
    const Type vec = Type::vector(options.hidden);
    blocks::ForwardDeclaration expr(Type::input(), vec);
    std::vector<std::pair<blocks::Input, Block>> cases;
    cases.emplace_back("digit",
                       blocks::GetItem("number") >> blocks::Scalar(DType::kInt32) >>
                           Function("digit", {Type::scalar(DType::kInt32)},
                                    [this](std::span<const Var> in) { return (*digits)(in[0]); }));
    for (std::size_t k = 0; k < kOps.size(); ++k) {
      Block operands = blocks::Record({{"left", expr()}, {"right", expr()}});
      cases.emplace_back(kOps[k],
                         operands >> Function(std::string("op") + kOps[k], {vec, vec},
                                              [this, k](std::span<const Var> in) {
                                                return (*combiners[k])(concat({in[0], in[1]}));
                                              }));
    }
    auto key = [](const blocks::Input& x) {
      return x.contains("number") ? blocks::Input("digit") : x.at("op");
    };
    expression = blocks::OneOf(key, std::move(cases));
    expr.resolve_to(expression);

    blocks::Composition graph("calculator");
    auto logits =
        graph.add(blocks::GetItem("expression") >> expr() >>
                      Function("classify", {vec},
                               [this](std::span<const Var> in) { return (*classifier)(in[0]); }),
                  graph.input());
    graph.add(blocks::Metric("sign"), {logits, graph.add(blocks::GetItem("sign"), graph.input())});
    graph.set_output(logits);
    return graph;
  }

  const std::vector<json>& split(train::Split which) const {
    return which == train::Split::kTrain ? train : (which == train::Split::kDev ? dev : test);
  }

  train::BatchFigures run(const train::Batch& batch, bool training, Rng* rng) {
    blocks::BatchResult result = runner.run(batch, split(batch.split), training, rng);
    return classify_examples(result.metric("sign"), training);
  }
};

CalculatorModel::CalculatorModel(CalculatorOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
CalculatorModel::~CalculatorModel() = default;

std::string CalculatorModel::config_json() const {
  const CalculatorOptions& o = impl_->options;
  return json{{"hidden", o.hidden},
              {"train_examples", o.train_examples},
              {"eval_examples", o.eval_examples},
              {"max_depth", o.data.max_depth},
              {"leaf_probability", o.data.leaf_probability},
              {"seed", o.seed}}
      .dump();
}

std::vector<Parameter> CalculatorModel::parameters() { return impl_->store.parameters(); }

std::size_t CalculatorModel::num_examples(train::Split split) const {
  return impl_->split(split).size();
}

train::BatchFigures CalculatorModel::train_batch(const train::Batch& batch, Rng& rng) {
  return impl_->run(batch, true, &rng);
}

train::BatchFigures CalculatorModel::eval_batch(const train::Batch& batch) {
  return impl_->run(batch, false, nullptr);
}

std::unique_ptr<train::PreparedBatch> CalculatorModel::prepare_batch(
    train::Split split, std::span<const std::size_t> ids) {
  return impl_->runner.prepare(impl_->split(split), ids);
}

json CalculatorModel::parse_example(std::string_view line, std::string_view where) const {
  json value;
  try {
    value = json::parse(line);
  } catch (const json::parse_error& e) {
    fail("calculator", where, ": not JSON: ", e.what());
  }
  const json expression = value.contains("expression") ? value["expression"] : value;
  std::int64_t sign = 0;
  try {
    sign = expression_sign(expression);  // validates the whole expression
  } catch (const Error& e) {
    fail("calculator", where, ": ", e.what());
  }
  return json{{"expression", expression}, {"sign", std::int32_t(sign + 1)}};
}

std::vector<json> CalculatorModel::predict(std::span<const json> examples) {
  blocks::BatchResult result = impl_->runner.infer(examples);
  const std::vector<float> logits = result.output(0).value().to_float_vector();
  std::vector<json> predictions;
  for (std::size_t i = 0; i < examples.size(); ++i) {
    const std::span<const float> row(logits.data() + i * kClasses, kClasses);
    const auto best = std::max_element(row.begin(), row.end()) - row.begin();
    predictions.push_back(
        json{{"sign", kSignNames[std::size_t(best)]}, {"probabilities", probabilities_json(row)}});
  }
  return predictions;
}

const Block& CalculatorModel::root_block() const { return impl_->runner.root(); }

std::span<const json> CalculatorModel::examples(train::Split split) const {
  return impl_->split(split);
}

double CalculatorModel::majority_rate(train::Split split) const {
  std::array<std::int64_t, kClasses> counts{};
  for (const json& e : impl_->split(split)) ++counts[e["sign"].get<std::size_t>()];
  const auto total = std::max<std::int64_t>(1, counts[0] + counts[1] + counts[2]);
  return double(*std::max_element(counts.begin(), counts.end())) / double(total);
}

}  // namespace weft::models
