// The original's calculator example as Weft's built-in default job: a Tree-RNN over random
// arithmetic expressions (models/calculator_data.h) that predicts the sign of the value
// (negative / zero / positive). Digits are embedded; each operator has its own FC layer over
// the concatenated operands; a softmax layer classifies the root. Written with blocks:
// ForwardDeclaration for the recursion, OneOf on the operator, Record for the operands.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "weft/core/export.h"
#include "weft/models/block_model.h"
#include "weft/models/calculator_data.h"

WEFT_API_BEGIN
namespace weft::models {

// The options of the generated expressions (max_depth, leaf_probability), which every model
// over them shares.
std::vector<OptionSpec> expression_data_options();
// The splits of a model over generated expressions, from its options (seed, max_depth,
// leaf_probability; max_train and max_eval, 0 meaning `default_train` / `default_eval`): one
// random stream per split, so dev and test do not depend on the training set's size. None for
// inference, no training split for evaluation. `add` receives each example in order.
void generate_expression_splits(
    const OptionValues& options, ModelUse use, std::int64_t default_train,
    std::int64_t default_eval,
    const std::function<void(train::Split, const CalculatorExample&)>& add);

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
