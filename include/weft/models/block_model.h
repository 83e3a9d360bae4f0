// The shared base of the models written with blocks. A model is its layers, its root block, how
// it reads an example and how it turns a batch's outputs into figures and predictions; the
// plumbing is written once here: the parameter store (seeded and placed from the options), the
// splits, the compiled root, weaving batches ahead of time on the trainer's thread or on the
// spot, and running them in training mode (gradients, dropout) or inference mode.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/blocks/compiler.h"
#include "weft/core/export.h"
#include "weft/models/model.h"
#include "weft/nn/parameter_store.h"

WEFT_API_BEGIN
namespace weft::models {

class BlockModel : public Model {
 public:
  ~BlockModel() override;

  std::string name() const final { return options_.owner(); }
  const OptionValues& options() const final { return options_; }
  std::vector<Parameter> parameters() final { return store_.parameters(); }
  std::size_t num_examples(train::Split split) const final;
  // The loom calls of the example woven alone (its nodes): what a rank's share costs.
  double example_cost(train::Split split, std::size_t id) const final;
  train::BatchFigures train_batch(const train::Batch& batch, Rng& rng) final;
  train::BatchFigures eval_batch(const train::Batch& batch) final;
  std::unique_ptr<train::PreparedBatch> prepare_batch(train::Split split,
                                                      std::span<const std::size_t> ids) final;
  std::vector<nlohmann::json> predict(std::span<const nlohmann::json> examples) final;
  const blocks::Block& root_block() const final { return root_; }
  loom::Strategy loom_strategy() const final { return strategy_; }
  std::span<const nlohmann::json> examples(train::Split split) const final;

  // Weaving apart from running: a single model does, an ensemble weaves per member.
  bool weaves_apart() const final { return compiler_ != nullptr && members_.empty(); }
  blocks::WovenBatch weave_examples(std::span<const nlohmann::json> examples) const final;
  std::vector<nlohmann::json> predict_woven(const blocks::WovenBatch& woven) final;

  // Ensembles: a model opts in by overriding ensemble_averaging (Model).
  void add_ensemble_member(std::unique_ptr<Model> member) final;
  std::size_t ensemble_size() const final { return 1 + members_.size(); }
  std::vector<Tensor> ensemble_values(std::span<const nlohmann::json> pool,
                                      std::span<const std::size_t> ids,
                                      std::span<const std::string> metrics) final;

 protected:
  // `options` come from the model's registry entry, checked. The parameter store is seeded
  // with their seed and lives on their device, within init's parameter budget.
  BlockModel(OptionValues options, const ModelInit& init);

  nn::ParameterStore& store() { return store_; }
  // For recording a value the model resolved (e.g. the embedding size of a vector file).
  OptionValues& mutable_options() { return options_; }
  // The examples of a split, in the root block's Input form; the constructor fills them.
  std::vector<nlohmann::json>& split_examples(train::Split split);
  // Compiles the root block, once every layer exists (weaving threads from the options).
  // `preferred` is the schedule used when the loom_strategy option is auto: by_depth, or
  // agenda for a model whose operations sit at scattered depths (agenda then reaches the
  // schedule's lower bound where by_depth runs an operation at every depth it occurs at).
  void compile(blocks::Block root, loom::Strategy preferred = loom::Strategy::kByDepth);

  // A run batch's figures. With `training`, backpropagate the gradient of the batch's MEAN
  // loss from the result's Vars (they live on the model's tape).
  virtual train::BatchFigures figures(const blocks::BatchResult& result, const train::Batch& batch,
                                      bool training) = 0;
  // One JSON object of predictions per example of an inference run over `count` examples.
  virtual std::vector<nlohmann::json> predictions(const blocks::BatchResult& result,
                                                  std::size_t count) = 0;

 private:
  train::BatchFigures run(const train::Batch& batch, bool training, Rng* rng);
  // Runs the members on pool[ids...] (inference mode) and replaces every output and metric of
  // `result` (the lead's, on tape_) with the average over the lead and the members.
  void average_members(blocks::BatchResult& result, std::span<const nlohmann::json> pool,
                       std::span<const std::size_t> ids);

  OptionValues options_;
  nn::ParameterStore store_;
  std::array<std::vector<nlohmann::json>, 3> splits_;  // train, dev, test
  blocks::Block root_;
  std::unique_ptr<blocks::Compiler> compiler_;
  loom::Strategy strategy_ = loom::Strategy::kByDepth;
  Tape tape_;
  blocks::WovenBatch local_;  // a batch woven on the spot, kept while its result is used
  std::vector<std::unique_ptr<Model>> members_;  // an ensemble's other models
};

}  // namespace weft::models
WEFT_API_END
