// What the `weft` command line needs of a model beyond training: a name for `weft train
// <model>`, its examples read from the user's text (one JSON value or the model's own line
// format per line), and predictions as JSON. Training itself is train::TrainableModel's.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/blocks/blocks.h"
#include "weft/loom/schedule.h"
#include "weft/train/trainer.h"

namespace weft::models {

class Model : public train::TrainableModel {
 public:
  // One example from one line of user input; `where` ("file:line") names it in errors.
  virtual nlohmann::json parse_example(std::string_view line, std::string_view where) const = 0;
  // One JSON object of predictions per example, in order (inference mode, no gradients).
  virtual std::vector<nlohmann::json> predict(std::span<const nlohmann::json> examples) = 0;
  // The model's root block and a split's examples in its Input form, for measuring it.
  virtual const blocks::Block& root_block() const = 0;
  virtual std::span<const nlohmann::json> examples(train::Split split) const = 0;
};

// Inference throughput (examples/s) of `root` over `examples` in batches of `batch_size`,
// scheduled with `strategy`: by_depth is dynamic batching, none one call per node (the
// unbatched baseline). Weaving is included; gradients are off.
double inference_rate(const blocks::Block& root, std::span<const nlohmann::json> examples,
                      loom::Strategy strategy, std::size_t batch_size);

}  // namespace weft::models
