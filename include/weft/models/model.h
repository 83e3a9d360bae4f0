// The model contract every front end (the command line, Python, a server, distributed training)
// uses: a trainable model that also reads examples from the user's text, predicts, reports its
// checked options and the assets (vocabularies, label names, feature tables) it needs beyond
// its parameters — what a self-contained checkpoint stores (models/saved_model.h).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/blocks/blocks.h"
#include "weft/blocks/compiler.h"
#include "weft/core/export.h"
#include "weft/loom/schedule.h"
#include "weft/models/options.h"
#include "weft/tensor/tensor.h"
#include "weft/train/trainer.h"

WEFT_API_BEGIN
namespace weft::models {

class DecodingModel;

// What a model is built for, which decides the data it reads.
enum class ModelUse {
  kTrain,     // every split from the data folder; assets made from the training data
  kEvaluate,  // every split from the data folder, encoded with the checkpoint's assets
  kInfer,     // no data at all: everything comes from the checkpoint's assets
};

// How an ensemble (models/ensemble.h) combines its members' outputs and metric values.
enum class EnsembleAveraging {
  kNone,     // the model cannot be ensembled (its outputs are not class scores)
  kSoftmax,  // rows of logits: the mean of softmax(row) over members, returned as its log so
             // that a softmax of the result gives the mean exactly
};

// How a registry factory builds a model: what for, and (for kEvaluate and kInfer) the assets
// read from a checkpoint, as assets() returned them when it was saved.
struct ModelInit {
  ModelUse use = ModelUse::kTrain;
  const nlohmann::json* assets = nullptr;
  // When positive, building the model fails (before allocating) once its parameters would
  // exceed this many elements: a checkpoint's options cannot ask for more parameters than the
  // file holds (load_model sets it from the file's size).
  std::int64_t max_parameter_elements = 0;
  std::string parameter_budget_reason = {};
};

class Model : public train::TrainableModel {
 public:
  // The checked options it was built with, with the values it resolved filled in (e.g. the
  // embedding size read from a vector file), as checkpoints store them.
  virtual const OptionValues& options() const = 0;
  // What inference needs beyond the parameters, as one JSON object (empty when nothing).
  virtual nlohmann::json assets() const { return nlohmann::json::object(); }
  // Stored in checkpoints: {"options": options().values(), "assets": assets()}.
  std::string config_json() const override;

  // One example from one line of user input; `where` ("file:line") names it in errors.
  virtual nlohmann::json parse_example(std::string_view line, std::string_view where) const = 0;
  // One JSON object of predictions per example, in order (inference mode, no gradients).
  virtual std::vector<nlohmann::json> predict(std::span<const nlohmann::json> examples) = 0;
  // The model's root block and a split's examples in its Input form, for measuring it.
  virtual const blocks::Block& root_block() const = 0;
  // How this model's batches are scheduled (the loom_strategy option, or the model's choice).
  virtual loom::Strategy loom_strategy() const { return loom::Strategy::kByDepth; }
  virtual std::span<const nlohmann::json> examples(train::Split split) const = 0;
  // Lines for the user about the data read (records skipped, overlaps removed), once.
  virtual std::vector<std::string> data_notes() const { return {}; }
  // Lines to print after a split's figures (e.g. the accuracy of the majority class).
  virtual std::vector<std::string> split_notes(train::Split /*split*/) const { return {}; }

  // Capabilities beyond the contract above. Each has a query and defaults that refuse, so a
  // driver asks the model rather than its class, and a new kind of model opts in by overriding.

  // Weaving apart from running (models/streaming_inference.h, the server): when true, a
  // caller may weave the next batch on any thread (weave_examples is const) while this one
  // runs on the thread that owns the model, and predict_woven(weave_examples(x)) equals
  // predict(x).
  virtual bool weaves_apart() const { return false; }
  virtual blocks::WovenBatch weave_examples(std::span<const nlohmann::json> examples) const;
  virtual std::vector<nlohmann::json> predict_woven(const blocks::WovenBatch& woven);

  // Ensembles (models/ensemble.h). How this model's outputs and metrics average: models whose
  // every output and metric holds class logits return kSoftmax.
  virtual EnsembleAveraging ensemble_averaging() const { return EnsembleAveraging::kNone; }
  // Makes this model the lead of an ensemble with `member` (another checkpoint of the same
  // model): evaluation and predict() then run every member on the same examples and report the
  // averaged outputs; training and predict_woven refuse. Throws when the model cannot be
  // ensembled, or the member is another model or has other outputs or metrics.
  virtual void add_ensemble_member(std::unique_ptr<Model> member);
  virtual std::size_t ensemble_size() const { return 1; }
  // What this model contributes as a member: its outputs, then the values of `metrics` (an
  // undefined tensor for a metric without values), on pool[ids[0]], pool[ids[1]], ... in
  // inference mode, copied off its tape. Throws when its metrics are not `metrics`.
  virtual std::vector<Tensor> ensemble_values(std::span<const nlohmann::json> pool,
                                              std::span<const std::size_t> ids,
                                              std::span<const std::string> metrics);

  // Decoding step by step with flow programs (models/decoding.h): the model as one, or null;
  // what a server needs to batch at iteration level, without casting.
  virtual DecodingModel* decoding() { return nullptr; }
};

struct InferenceRate {
  double examples_per_second = 0;
  // Over the timed batches: the schedule's batched calls, and the fewest any schedule of the
  // same weaves could make (loom::min_batched_calls).
  std::int64_t batched_calls = 0;
  std::int64_t min_batched_calls = 0;
};

// Inference throughput of `root` over `examples` in batches of `batch_size`, compiled with
// `options` (its strategy: by_depth is dynamic batching, none one call per node, the unbatched
// baseline; its max_step_rows and weaving threads as the model runs them). Weaving is included;
// gradients are off. The first batch runs once untimed before the timed pass (warm-up).
InferenceRate inference_rate(const blocks::Block& root, std::span<const nlohmann::json> examples,
                             const blocks::CompilerOptions& options, std::size_t batch_size);

}  // namespace weft::models
WEFT_API_END
