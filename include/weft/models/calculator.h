// The original's calculator example as Weft's built-in default job: a Tree-RNN over random
// arithmetic expressions (models/calculator_data.h) that predicts the sign of the value
// (negative / zero / positive). Digits are embedded; each operator has its own FC layer over
// the concatenated operands; a softmax layer classifies the root. Written with blocks:
// ForwardDeclaration for the recursion, OneOf on the operator, Record for the operands.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "weft/models/calculator_data.h"
#include "weft/models/model.h"

namespace weft::models {

struct CalculatorOptions {
  std::int64_t hidden = 128;
  std::int64_t train_examples = 50000;
  std::int64_t eval_examples = 2000;  // dev and test each
  CalculatorDataOptions data;
  std::uint64_t seed = 1;  // data (one stream per split) and initial weights
};

class CalculatorModel : public Model {
 public:
  explicit CalculatorModel(CalculatorOptions options);
  ~CalculatorModel() override;

  std::string name() const override { return "calculator"; }
  std::string config_json() const override;
  std::vector<Parameter> parameters() override;
  std::size_t num_examples(train::Split split) const override;
  train::BatchFigures train_batch(const train::Batch& batch, Rng& rng) override;
  train::BatchFigures eval_batch(const train::Batch& batch) override;
  std::unique_ptr<train::PreparedBatch> prepare_batch(train::Split split,
                                                      std::span<const std::size_t> ids) override;

  // An expression as JSON ({"number": 7} / {"op", "left", "right"}), optionally wrapped as
  // {"expression": ..., "sign": k}.
  nlohmann::json parse_example(std::string_view line, std::string_view where) const override;
  // {"sign": "negative"|"zero"|"positive", "probabilities": [3]}.
  std::vector<nlohmann::json> predict(std::span<const nlohmann::json> examples) override;
  const blocks::Block& root_block() const override;
  std::span<const nlohmann::json> examples(train::Split split) const override;

  // The share of the majority class in a split (the accuracy to beat).
  double majority_rate(train::Split split) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::models
