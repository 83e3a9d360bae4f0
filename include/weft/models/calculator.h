// The original's calculator example as Weft's built-in default job: a Tree-RNN over random
// arithmetic expressions (models/calculator_data.h) that predicts the sign of the value
// (negative / zero / positive). Digits are embedded; each operator has its own FC layer over
// the concatenated operands; a softmax layer classifies the root. Written with blocks:
// ForwardDeclaration for the recursion, OneOf on the operator, Record for the operands.
#pragma once

#include <memory>

#include "weft/core/export.h"
#include "weft/models/block_model.h"
#include "weft/models/calculator_data.h"

WEFT_API_BEGIN
namespace weft::models {

class CalculatorModel : public BlockModel {
 public:
  // `options` from its registry entry. The examples are generated from the seed (one stream
  // per split); for inference none are, and for evaluation no training set is.
  explicit CalculatorModel(const OptionValues& options, const ModelInit& init = {});
  ~CalculatorModel() override;

  // An expression as JSON ({"number": 7} / {"op", "left", "right"}), optionally wrapped as
  // {"expression": ..., "sign": k}.
  nlohmann::json parse_example(std::string_view line, std::string_view where) const override;
  // Every output and metric holds class logits: an ensemble averages their probabilities.
  EnsembleAveraging ensemble_averaging() const override { return EnsembleAveraging::kSoftmax; }
  std::vector<std::string> split_notes(train::Split split) const override;
  // The share of the majority class in a split (the accuracy to beat).
  double majority_rate(train::Split split) const;

 private:
  // {"sign": "negative"|"zero"|"positive", "probabilities": [3]}.
  std::vector<nlohmann::json> predictions(const blocks::BatchResult& result,
                                          std::size_t count) override;
  train::BatchFigures figures(const blocks::BatchResult& result, const train::Batch& batch,
                              bool training) override;
  blocks::Block make_blocks();

  struct Layers;
  std::unique_ptr<Layers> layers_;
  blocks::Block expression_;  // kept alive: the forward declaration's references hold it weakly
};

}  // namespace weft::models
WEFT_API_END
