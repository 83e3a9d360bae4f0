// The shared base of the models that decode with flow programs (tree2seq, seq2tree): a
// parameter store and a loom of the model's operations, the splits, training by teacher forcing
// through a flow engine (the encoder's static weave and every decoding step on one tape, so
// gradients reach the encoder), evaluation by loss, per-decision accuracy and exact match of
// greedy (dev, test) and beam (test) decoding, and prediction through DecodingModel::decode.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/core/export.h"
#include "weft/loom/loom.h"
#include "weft/models/decoding.h"
#include "weft/models/model.h"
#include "weft/nn/parameter_store.h"

WEFT_API_BEGIN
namespace weft::models {

// The runtime options every flow model has: beam, eval_beam.
std::vector<OptionSpec> decoding_options();
// The options of the models over calculator expressions: hidden, then max_depth and
// leaf_probability of the generated expressions (the calculator's), then decoding_options().
std::vector<OptionSpec> expression_model_options();
// Their recipe: 8 epochs of Adam under a cosine schedule, gradients clipped, the best epoch by
// dev exact match.
nlohmann::json expression_model_recipe(const OptionValues& options);
// Their splits' sizes when max_train / max_eval are 0.
constexpr std::int64_t kDefaultTrainExpressions = 20000, kDefaultEvalExpressions = 1000;

class FlowModel : public Model, public DecodingModel {
 public:
  ~FlowModel() override;

  std::string name() const final { return options_.owner(); }
  const OptionValues& options() const final { return options_; }
  std::vector<Parameter> parameters() final { return store_.parameters(); }
  std::size_t num_examples(train::Split split) const final;
  train::BatchFigures train_batch(const train::Batch& batch, Rng& rng) final;
  train::BatchFigures eval_batch(const train::Batch& batch) final;
  // decode() with the options' settings.
  std::vector<nlohmann::json> predict(std::span<const nlohmann::json> examples) final;
  // An empty block: these models are not one static weave (weft train --compare-unbatched
  // does not apply to them).
  const blocks::Block& root_block() const final { return no_block_; }
  std::span<const nlohmann::json> examples(train::Split split) const final;
  DecodingModel* decoding() final { return this; }
  // The exact match of always answering the training split's most frequent expression.
  double majority_rate(train::Split split) const;
  std::vector<std::string> split_notes(train::Split split) const override;

  const loom::Loom& decoding_loom() const final { return loom_; }
  Device decoding_device() const final { return store_.device(); }
  DecodeSettings decode_settings() const final;
  std::vector<std::unique_ptr<DecodeJob>> encode(flow::Engine& engine,
                                                 std::span<const nlohmann::json> examples,
                                                 const DecodeSettings& settings) final;

  // One example's encoder outputs, as each model keeps them.
  struct Encoding {
    virtual ~Encoding() = default;
  };
  // What teacher forcing issued for one example: each decision's log-probabilities (one type,
  // [decisions]) and the gold decision's index.
  struct Targets {
    std::vector<flow::Val> log_probs;
    std::vector<std::int32_t> gold;
  };

 protected:
  // `options` from the model's registry entry, checked; the store is seeded from them.
  FlowModel(OptionValues options, const ModelInit& init);

  nn::ParameterStore& store() { return store_; }
  loom::Loom& loom() { return loom_; }
  std::vector<nlohmann::json>& split_examples(train::Split split);
  // The split's examples made from the calculator's generator, one random stream per split
  // (as the calculator's), with the options seed, max_depth, leaf_probability, max_train and
  // max_eval (0: `default_train`, `default_eval`); `make` turns a generated expression into
  // the model's example. None for inference, no training split for evaluation.
  void generate_splits(const ModelInit& init,
                       const std::function<nlohmann::json(const nlohmann::json&)>& make,
                       std::int64_t default_train, std::int64_t default_eval);

  // Encodes a batch with one static weave onto the engine's tape; one Encoding per example.
  // A malformed example throws naming it ("example 3: ..."). `joining`: DecodeSettings::joining.
  virtual std::vector<std::unique_ptr<Encoding>> encode_batch(
      flow::Engine& engine, std::span<const nlohmann::json> examples, bool joining) = 0;
  // Teacher forcing for one example: issues the steps of its gold decisions into `out`.
  virtual flow::Program teacher_program(flow::Context& ctx, const Encoding& encoding,
                                        const nlohmann::json& example, Targets& out) = 0;
  virtual std::unique_ptr<DecodeJob> decode_job(std::unique_ptr<Encoding> encoding,
                                                const DecodeSettings& settings) = 0;
  // Whether a decoded answer is the example's gold output.
  virtual bool exact_match(const nlohmann::json& answer, const nlohmann::json& example) const = 0;

 private:
  train::BatchFigures teacher_forcing(std::span<const nlohmann::json> batch, bool training,
                                      Rng* rng);
  std::vector<nlohmann::json> batch_examples(const train::Batch& batch) const;

  OptionValues options_;
  nn::ParameterStore store_;
  loom::Loom loom_;
  std::array<std::vector<nlohmann::json>, 3> splits_;  // train, dev, test
  blocks::Block no_block_;
  Tape tape_;
};

}  // namespace weft::models
WEFT_API_END
