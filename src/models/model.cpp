// The model contract's shared pieces: the configuration a checkpoint stores, and measuring a
// model as the paper does (the same examples, dynamically batched or one call per node, timed in
// one process).
#include "weft/models/model.h"

#include <algorithm>
#include <chrono>

#include "weft/blocks/compiler.h"
#include "weft/core/error.h"
#include "weft/nn/mode.h"

namespace weft::models {

std::string Model::config_json() const {
  return nlohmann::json{{"options", options().values()}, {"assets", assets()}}.dump();
}

blocks::WovenBatch Model::weave_examples(std::span<const nlohmann::json> /*examples*/) const {
  fail(name(), "this model does not weave apart from running (weaves_apart() is false)");
}

std::vector<nlohmann::json> Model::predict_woven(const blocks::WovenBatch& /*woven*/) {
  fail(name(), "this model does not weave apart from running (weaves_apart() is false)");
}

void Model::add_ensemble_member(std::unique_ptr<Model> /*member*/) {
  fail(name(), "this model cannot be ensembled: its outputs are not class scores");
}

std::vector<Tensor> Model::ensemble_values(std::span<const nlohmann::json> /*pool*/,
                                           std::span<const std::size_t> /*ids*/,
                                           std::span<const std::string> /*metrics*/) {
  fail(name(), "this model cannot be an ensemble member: its outputs are not class scores");
}

InferenceRate inference_rate(const blocks::Block& root, std::span<const nlohmann::json> examples,
                             const blocks::CompilerOptions& options, std::size_t batch_size) {
  if (examples.empty() || batch_size == 0) {
    fail("inference_rate", "needs examples and a positive batch size");
  }
  blocks::Compiler compiler(root, options);
  Tape tape;
  tape.set_grad_enabled(false);
  TapeScope scope(tape);
  nn::ForwardMode mode(false);
  // One untimed batch first: the allocator's pools, the caches and the first products of each
  // GEMM shape class (which a fresh machine times to choose its provider) are not the rate.
  compiler.forward(examples.subspan(0, std::min(batch_size, examples.size())), tape);
  InferenceRate rate;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t first = 0; first < examples.size(); first += batch_size) {
    const std::size_t count = std::min(batch_size, examples.size() - first);
    tape.clear();
    blocks::BatchResult result = compiler.forward(examples.subspan(first, count), tape);
    rate.batched_calls += result.stats().batched_calls;
    rate.min_batched_calls += result.stats().min_batched_calls;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  rate.examples_per_second = double(examples.size()) / std::max(seconds, 1e-9);
  return rate;
}

}  // namespace weft::models
