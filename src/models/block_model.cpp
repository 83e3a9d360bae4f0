// The plumbing every block model shares (models/block_model.h).
#include "weft/models/block_model.h"

#include <algorithm>
#include <numeric>
#include <typeinfo>

#include "weft/core/error.h"
#include "weft/models/ensemble.h"
#include "weft/nn/mode.h"

namespace weft::models {
namespace {

struct PreparedWeave : train::PreparedBatch {
  blocks::WovenBatch woven;
};

// A run's outputs, then the values of `metrics` (undefined when a metric has none), copied off
// its tape: what an ensemble averages.
std::vector<Tensor> copied_values(const blocks::BatchResult& result,
                                  std::span<const std::string> metrics) {
  std::vector<Tensor> values;
  values.reserve(result.num_outputs() + metrics.size());
  for (std::size_t k = 0; k < result.num_outputs(); ++k)
    values.push_back(result.output(k).value().clone());
  for (const std::string& m : metrics) {
    const Var v = result.metric(m).values;
    values.push_back(v.defined() ? v.value().clone() : Tensor());
  }
  return values;
}

}  // namespace

BlockModel::BlockModel(OptionValues options, const ModelInit& init)
    : options_(std::move(options)),
      store_(std::uint64_t(options_.integer("seed")), parse_device(options_.text("device"))) {
  if (init.max_parameter_elements > 0)
    store_.set_element_budget(init.max_parameter_elements, init.parameter_budget_reason);
}

BlockModel::~BlockModel() = default;

std::size_t BlockModel::num_examples(train::Split split) const {
  return splits_[std::size_t(split)].size();
}

double BlockModel::example_cost(train::Split split, std::size_t id) const {
  const blocks::WovenBatch woven = compiler_->weave(examples(split), std::span(&id, 1));
  return double(std::max<std::size_t>(1, woven.weaver().num_calls()));
}

std::span<const nlohmann::json> BlockModel::examples(train::Split split) const {
  return splits_[std::size_t(split)];
}

std::vector<nlohmann::json>& BlockModel::split_examples(train::Split split) {
  return splits_[std::size_t(split)];
}

void BlockModel::compile(blocks::Block root, loom::Strategy preferred) {
  root_ = std::move(root);
  blocks::CompilerOptions compiler_options;
  const std::string& strategy = options_.text("loom_strategy");
  strategy_ = strategy == "auto" ? preferred : loom::parse_strategy(strategy);
  compiler_options.strategy = strategy_;
  compiler_options.max_step_rows = std::uint32_t(options_.integer("max_step_rows"));
  compiler_options.threads = int(options_.integer("weave_threads"));
  compiler_options.device = store_.device();
  compiler_ = std::make_unique<blocks::Compiler>(root_, compiler_options);
}

std::unique_ptr<train::PreparedBatch> BlockModel::prepare_batch(train::Split split,
                                                                std::span<const std::size_t> ids) {
  auto prepared = std::make_unique<PreparedWeave>();
  prepared->woven = compiler_->weave(examples(split), ids);
  return prepared;
}

train::BatchFigures BlockModel::run(const train::Batch& batch, bool training, Rng* rng) {
  if (!compiler_) fail(name(), "the model's root block was never compiled");
  if (training && !members_.empty()) fail(name(), "an ensemble of checkpoints cannot be trained");
  const blocks::WovenBatch* woven = nullptr;
  if (batch.prepared != nullptr) {
    // The trainer hands back what this model's prepare_batch made (train::Batch's contract).
    if (typeid(*batch.prepared) != typeid(PreparedWeave))
      fail(name(), "a batch prepared by another model was handed to this one");
    woven = &static_cast<const PreparedWeave*>(batch.prepared)->woven;
  } else {
    local_ = compiler_->weave(examples(batch.split), batch.example_ids);
    woven = &local_;
  }
  tape_.clear();
  tape_.set_grad_enabled(training);
  TapeScope scope(tape_);
  nn::ForwardMode mode(training, rng);
  blocks::BatchResult result = compiler_->run(*woven, tape_);
  if (!members_.empty()) average_members(result, examples(batch.split), batch.example_ids);
  return figures(result, batch, training);
}

train::BatchFigures BlockModel::train_batch(const train::Batch& batch, Rng& rng) {
  return run(batch, true, &rng);
}

train::BatchFigures BlockModel::eval_batch(const train::Batch& batch) {
  return run(batch, false, nullptr);
}

std::vector<nlohmann::json> BlockModel::predict(std::span<const nlohmann::json> examples) {
  if (!compiler_) fail(name(), "the model's root block was never compiled");
  if (examples.empty()) return {};
  tape_.clear();
  tape_.set_grad_enabled(false);
  TapeScope scope(tape_);
  nn::ForwardMode mode(false);
  blocks::BatchResult result = compiler_->forward(examples, tape_);
  if (!members_.empty()) {
    std::vector<std::size_t> all(examples.size());
    std::iota(all.begin(), all.end(), std::size_t(0));
    average_members(result, examples, all);
  }
  return predictions(result, examples.size());
}

blocks::WovenBatch BlockModel::weave_examples(std::span<const nlohmann::json> examples) const {
  if (!compiler_) fail(name(), "the model's root block was never compiled");
  return compiler_->weave(examples);
}

std::vector<nlohmann::json> BlockModel::predict_woven(const blocks::WovenBatch& woven) {
  if (!compiler_) fail(name(), "the model's root block was never compiled");
  if (!members_.empty())
    fail(name(), "an ensemble predicts with predict(): each member weaves its own batch");
  if (woven.size() == 0) return {};
  tape_.clear();
  tape_.set_grad_enabled(false);
  TapeScope scope(tape_);
  nn::ForwardMode mode(false);
  const blocks::BatchResult result = compiler_->run(woven, tape_);
  return predictions(result, woven.size());
}

void BlockModel::add_ensemble_member(std::unique_ptr<Model> member) {
  if (!compiler_ || !member) fail(name(), "an ensemble needs compiled models");
  if (ensemble_averaging() == EnsembleAveraging::kNone)
    fail(name(), "this model cannot be ensembled: its outputs are not class scores");
  if (member->name() != name())
    fail(name(), "cannot ensemble a '", member->name(), "' model with a '", name(), "' model");
  if (member->ensemble_averaging() != ensemble_averaging() || member->ensemble_size() != 1)
    fail(name(), "an ensemble member must be a single model that averages like the lead");
  members_.push_back(std::move(member));
}

std::vector<Tensor> BlockModel::ensemble_values(std::span<const nlohmann::json> pool,
                                                std::span<const std::size_t> ids,
                                                std::span<const std::string> metrics) {
  if (!compiler_) fail(name(), "the model's root block was never compiled");
  tape_.clear();
  tape_.set_grad_enabled(false);
  TapeScope scope(tape_);
  nn::ForwardMode mode(false);
  const blocks::BatchResult r = compiler_->forward(pool, ids, tape_);
  const std::vector<std::string> mine = r.metric_names();
  if (!std::equal(mine.begin(), mine.end(), metrics.begin(), metrics.end()))
    fail(name(), "an ensemble member has other metrics than the lead model");
  return copied_values(r, metrics);
}

void BlockModel::average_members(blocks::BatchResult& result, std::span<const nlohmann::json> pool,
                                 std::span<const std::size_t> ids) {
  // Each model's values as tensors copied off its tape: [model][output or metric].
  const std::vector<std::string> metrics = result.metric_names();
  const std::size_t slots = result.num_outputs() + metrics.size();
  std::vector<std::vector<Tensor>> all{copied_values(result, metrics)};
  for (const auto& member : members_) {
    all.push_back(member->ensemble_values(pool, ids, metrics));
    if (all.back().size() != slots)
      fail(name(), "an ensemble member has other outputs than the lead model");
  }
  for (std::size_t slot = 0; slot < slots; ++slot) {
    if (!all[0][slot].defined()) continue;
    std::vector<Tensor> per_model;
    for (const auto& values : all) per_model.push_back(values[slot]);
    const Var averaged = tape_.constant(average_softmax(per_model).to(store_.device()));
    if (slot < result.num_outputs()) {
      result.replace_output(slot, averaged);
    } else {
      result.replace_metric(metrics[slot - result.num_outputs()], averaged);
    }
  }
}

}  // namespace weft::models
