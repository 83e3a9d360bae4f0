// The plumbing every block model shares (models/block_model.h).
#include "weft/models/block_model.h"

#include "weft/core/error.h"
#include "weft/nn/mode.h"

namespace weft::models {
namespace {

struct PreparedWeave : train::PreparedBatch {
  blocks::WovenBatch woven;
};

blocks::WovenBatch weave_ids(const blocks::Compiler& compiler,
                             std::span<const nlohmann::json> examples,
                             std::span<const std::size_t> ids) {
  std::vector<nlohmann::json> batch;
  batch.reserve(ids.size());
  for (std::size_t id : ids) {
    if (id >= examples.size()) {
      fail("model", "example ", id, " is out of range: the split has ", examples.size());
    }
    batch.push_back(examples[id]);
  }
  return compiler.weave(batch);
}

Device device_option(const OptionValues& options) {
  const std::string& device = options.text("device");
  if (device == "cpu") return Device::kCpu;
  if (device == "cuda") return Device::kCuda;
  fail(options.owner(), "option 'device' must be cpu or cuda, got '", device, "'");
}

}  // namespace

BlockModel::BlockModel(OptionValues options, const ModelInit& init)
    : options_(std::move(options)),
      store_(std::uint64_t(options_.integer("seed")), device_option(options_)) {
  if (init.max_parameter_elements > 0)
    store_.set_element_budget(init.max_parameter_elements, init.parameter_budget_reason);
}

BlockModel::~BlockModel() = default;

std::size_t BlockModel::num_examples(train::Split split) const {
  return splits_[std::size_t(split)].size();
}

std::span<const nlohmann::json> BlockModel::examples(train::Split split) const {
  return splits_[std::size_t(split)];
}

std::vector<nlohmann::json>& BlockModel::split_examples(train::Split split) {
  return splits_[std::size_t(split)];
}

void BlockModel::compile(blocks::Block root) {
  root_ = std::move(root);
  blocks::CompilerOptions compiler_options;
  compiler_options.threads = int(options_.integer("weave_threads"));
  compiler_options.device = store_.device();
  compiler_ = std::make_unique<blocks::Compiler>(root_, compiler_options);
}

std::unique_ptr<train::PreparedBatch> BlockModel::prepare_batch(train::Split split,
                                                                std::span<const std::size_t> ids) {
  auto prepared = std::make_unique<PreparedWeave>();
  prepared->woven = weave_ids(*compiler_, examples(split), ids);
  return prepared;
}

train::BatchFigures BlockModel::run(const train::Batch& batch, bool training, Rng* rng) {
  if (!compiler_) fail(name(), "the model's root block was never compiled");
  const blocks::WovenBatch* woven = nullptr;
  if (auto* prepared = dynamic_cast<PreparedWeave*>(batch.prepared)) {
    woven = &prepared->woven;
  } else {
    local_ = weave_ids(*compiler_, examples(batch.split), batch.example_ids);
    woven = &local_;
  }
  tape_.clear();
  tape_.set_grad_enabled(training);
  TapeScope scope(tape_);
  nn::ForwardMode mode(training, rng);
  const blocks::BatchResult result = compiler_->run(*woven, tape_);
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
  const blocks::BatchResult result = compiler_->forward(examples, tape_);
  return predictions(result, examples.size());
}

blocks::WovenBatch BlockModel::weave_examples(std::span<const nlohmann::json> examples) const {
  if (!compiler_) fail(name(), "the model's root block was never compiled");
  return compiler_->weave(examples);
}

std::vector<nlohmann::json> BlockModel::predict_woven(const blocks::WovenBatch& woven) {
  if (!compiler_) fail(name(), "the model's root block was never compiled");
  if (woven.size() == 0) return {};
  tape_.clear();
  tape_.set_grad_enabled(false);
  TapeScope scope(tape_);
  nn::ForwardMode mode(false);
  const blocks::BatchResult result = compiler_->run(woven, tape_);
  return predictions(result, woven.size());
}

}  // namespace weft::models
