// The calculator Tree-RNN with blocks: its registry entry and recipe, the model definition
// (make_blocks), its batches and its predictions. Examples are {"expression": <expression>,
// "sign": label}.
#include "weft/models/calculator.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>

#include "weft/autodiff/ops.h"
#include "weft/core/error.h"
#include "weft/io/json_lines.h"
#include "weft/models/classification.h"
#include "weft/models/registry.h"
#include "weft/nn/embedding.h"
#include "weft/nn/fc.h"

namespace weft::models {

using blocks::Block;
using blocks::Function;
using blocks::Type;
using nlohmann::json;

namespace {

constexpr int kClasses = 3;
constexpr std::array<const char*, kClasses> kSignNames{"negative", "zero", "positive"};
constexpr std::array<const char*, 3> kOps{"+", "-", "*"};
constexpr std::int64_t kDefaultTrainExamples = 50000;
constexpr std::int64_t kDefaultEvalExamples = 2000;

json make_example(const CalculatorExample& example) {
  return json{{"expression", example.expression}, {"sign", std::int32_t(example.label)}};
}

}  // namespace

// Its registry entry: options hidden (128), max_depth and leaf_probability of the generated
// expressions; max_train / max_eval 0 mean 50,000 training and 2,000 dev and test expressions.
ModelEntry calculator_entry() {
  ModelEntry entry;
  entry.name = "calculator";
  entry.summary =
      "Tree-RNN over random arithmetic expressions, predicts the sign (the default job)";
  entry.input =
      "an expression as JSON: {\"number\": 7} or {\"op\": \"+\", \"left\": ..., "
      "\"right\": ...}";
  entry.options = {
      {.name = "hidden", .default_value = 128, .help = "Hidden size", .min = 1, .max = 65536},
  };
  for (OptionSpec& spec : expression_data_options()) entry.options.push_back(std::move(spec));
  entry.recipe = [](const OptionValues&) {
    return json{{"epochs", 8},
                {"batch_size", 64},
                {"optimizer", "adam"},
                {"learning_rate", 0.003},
                {"best_metric", "accuracy"}};
  };
  entry.create = [](const OptionValues& options, const ModelInit& init) {
    return std::make_unique<CalculatorModel>(options, init);
  };
  return entry;
}

std::vector<OptionSpec> expression_data_options() {
  return {
      {.name = "max_depth",
       .default_value = 4,
       .help = "Deepest operator nesting of the generated expressions",
       .role = OptionRole::kData,
       .min = 0,
       .max = 5},
      {.name = "leaf_probability",
       .kind = OptionKind::kFloat,
       .default_value = 0.3,
       .help = "Chance that a generated node below the root is a digit",
       .role = OptionRole::kData,
       .min = 0,
       .max = 1},
  };
}

void generate_expression_splits(
    const OptionValues& options, ModelUse use, std::int64_t default_train,
    std::int64_t default_eval,
    const std::function<void(train::Split, const CalculatorExample&)>& add) {
  if (use == ModelUse::kInfer) return;
  const CalculatorDataOptions data{.max_depth = int(options.integer("max_depth")),
                                   .leaf_probability = float(options.number("leaf_probability"))};
  const std::uint64_t seed = std::uint64_t(options.integer("seed"));
  const std::int64_t max_train = options.integer("max_train");
  const std::int64_t max_eval = options.integer("max_eval");
  const train::Split splits[] = {train::Split::kTrain, train::Split::kDev, train::Split::kTest};
  for (std::uint64_t stream = 0; stream < 3; ++stream) {
    const train::Split split = splits[stream];
    if (split == train::Split::kTrain && use == ModelUse::kEvaluate) continue;
    Rng rng(mix64(seed, stream));
    const std::int64_t count = split == train::Split::kTrain
                                   ? (max_train > 0 ? max_train : default_train)
                                   : (max_eval > 0 ? max_eval : default_eval);
    for (const CalculatorExample& e : make_calculator_examples(count, rng, data)) add(split, e);
  }
}

struct CalculatorModel::Layers {
  std::unique_ptr<nn::Embedding> digits;
  std::vector<std::unique_ptr<nn::FC>> combiners;  // one per operator, in kOps order
  std::unique_ptr<nn::FC> classifier;
};

CalculatorModel::CalculatorModel(const OptionValues& options, const ModelInit& init)
    : BlockModel(options, init), layers_(std::make_unique<Layers>()) {
  generate_expression_splits(options, init.use, kDefaultTrainExamples, kDefaultEvalExamples,
                             [this](train::Split split, const CalculatorExample& e) {
                               split_examples(split).push_back(make_example(e));
                             });
  const std::int64_t n = options.integer("hidden");
  Layers& l = *layers_;
  l.digits = std::make_unique<nn::Embedding>(store(), "digit", 10, n);
  for (const char* op : kOps) {
    l.combiners.push_back(std::make_unique<nn::FC>(store(), std::string("op") + op, 2 * n, n));
  }
  l.classifier = std::make_unique<nn::FC>(store(), "classifier", n, kClasses,
                                          nn::FCOptions{.activation = nn::Activation::kNone});
  // The classifier reads only roots, which sit at every depth: run last, it is one call per
  // batch instead of one per depth (on the test set's batches of 256 the schedule then meets
  // its lower bound: BENCHMARKS.md, "Schedule quality").
  compile(make_blocks(), loom::Strategy::kSinksLast);
}

CalculatorModel::~CalculatorModel() = default;

Block CalculatorModel::make_blocks() {
  const Type vec = Type::vector(options().integer("hidden"));
  Layers* l = layers_.get();
  blocks::ForwardDeclaration expr(Type::input(), vec);
  std::vector<std::pair<blocks::Input, Block>> cases;
  cases.emplace_back("digit",
                     blocks::GetItem("number") >> blocks::Scalar(DType::kInt32) >>
                         Function("digit", {Type::scalar(DType::kInt32)},
                                  [l](std::span<const Var> in) { return (*l->digits)(in[0]); }));
  for (std::size_t k = 0; k < kOps.size(); ++k) {
    Block operands = blocks::Record({{"left", expr()}, {"right", expr()}});
    cases.emplace_back(kOps[k],
                       operands >> Function(std::string("op") + kOps[k], {vec, vec},
                                            [l, k](std::span<const Var> in) {
                                              return (*l->combiners[k])(concat({in[0], in[1]}));
                                            }));
  }
  auto key = [](const blocks::Input& x) {
    return x.contains("number") ? blocks::Input("digit") : x.at("op");
  };
  expression_ = blocks::OneOf(key, std::move(cases));
  expr.resolve_to(expression_);

  blocks::Composition graph("calculator");
  auto logits =
      graph.add(blocks::GetItem("expression") >> expr() >>
                    Function("classify", {vec},
                             [l](std::span<const Var> in) { return (*l->classifier)(in[0]); }),
                graph.input());
  graph.add(blocks::Metric("sign"), {logits, graph.add(blocks::GetItem("sign"), graph.input())});
  graph.set_output(logits);
  return graph;
}

train::BatchFigures CalculatorModel::figures(const blocks::BatchResult& result,
                                             const train::Batch& /*batch*/, bool training) {
  return classify_examples(result.metric("sign"), training);
}

json CalculatorModel::parse_example(std::string_view line, std::string_view where) const {
  const json value = io::parse_json(line, where, "calculator");
  const json expression =
      value.is_object() && value.contains("expression") ? value["expression"] : value;
  std::int64_t sign = 0;
  try {
    sign = expression_sign(expression);  // validates the whole expression
  } catch (const Error& e) {
    // Located once: "[calculator] instance 0: what", not "[calculator] instance 0: [calculator]
    // what".
    const std::string_view what = e.what(), own = "[calculator] ";
    fail("calculator", where, ": ", what.starts_with(own) ? what.substr(own.size()) : what);
  }
  return json{{"expression", expression}, {"sign", std::int32_t(sign + 1)}};
}

std::vector<json> CalculatorModel::predictions(const blocks::BatchResult& result,
                                               std::size_t count) {
  const std::vector<float> logits = result.output(0).value().to_float_vector();
  std::vector<json> out;
  for (std::size_t i = 0; i < count; ++i) {
    const std::span<const float> row(logits.data() + i * kClasses, kClasses);
    const auto best = std::max_element(row.begin(), row.end()) - row.begin();
    out.push_back(
        json{{"sign", kSignNames[std::size_t(best)]}, {"probabilities", probabilities_json(row)}});
  }
  return out;
}

double CalculatorModel::majority_rate(train::Split split) const {
  std::array<std::int64_t, kClasses> counts{};
  for (const json& e : examples(split)) ++counts[e["sign"].get<std::size_t>()];
  const auto total = std::max<std::int64_t>(1, counts[0] + counts[1] + counts[2]);
  return double(*std::max_element(counts.begin(), counts.end())) / double(total);
}

std::vector<std::string> CalculatorModel::split_notes(train::Split split) const {
  if (num_examples(split) == 0) return {};
  return {fmt::format("{} majority class: {:.3f} (the accuracy of always guessing it)",
                      train::split_name(split), majority_rate(split))};
}

}  // namespace weft::models
