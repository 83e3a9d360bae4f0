// The plumbing the flow models share (models/flow_model.h): generated splits, teacher forcing
// through a flow engine, evaluation by exact match of decoded answers, prediction by decode().
#include "weft/models/flow_model.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>

#include "weft/autodiff/ops.h"
#include "weft/core/error.h"
#include "weft/core/rng.h"
#include "weft/models/calculator.h"
#include "weft/nn/mode.h"

namespace weft::models {
std::vector<OptionSpec> decoding_options() {
  return {
      {.name = "beam",
       .default_value = 0,
       .help = "Beam width of predictions (0: greedy decoding)",
       .role = OptionRole::kRuntime,
       .min = 0,
       .max = 64},
      {.name = "length_penalty",
       .kind = OptionKind::kFloat,
       .default_value = 0.0,
       .help = "Beam search ranks hypotheses by log_prob / length^this (0: the summed "
               "log-probability, which favours short outputs; 0.6-1 evens that out)",
       .role = OptionRole::kRuntime,
       .min = 0,
       .max = kMaxLengthPenalty},
      {.name = "eval_beam",
       .default_value = 4,
       .help = "Beam width of the test split's exact_match_beam figure (0: not measured)",
       .role = OptionRole::kRuntime,
       .min = 0,
       .max = 64},
  };
}

std::vector<OptionSpec> expression_model_options() {
  std::vector<OptionSpec> options = {
      {.name = "hidden", .default_value = 64, .help = "Hidden size", .min = 1, .max = 4096},
  };
  for (OptionSpec& spec : expression_data_options()) options.push_back(std::move(spec));
  for (OptionSpec& spec : decoding_options()) options.push_back(std::move(spec));
  return options;
}

nlohmann::json expression_model_recipe(const OptionValues& /*options*/) {
  return nlohmann::json{{"epochs", 8},          {"batch_size", 64},
                        {"optimizer", "adam"},  {"learning_rate", 0.003},
                        {"schedule", "cosine"},  // to 0 over the run
                        {"clip_norm", 5.0},     {"best_metric", "exact_match"}};
}

FlowModel::FlowModel(OptionValues options, const ModelInit& init)
    : options_(std::move(options)),
      store_(std::uint64_t(options_.integer("seed")), parse_device(options_.text("device"))) {
  if (init.max_parameter_elements > 0)
    store_.set_element_budget(init.max_parameter_elements, init.parameter_budget_reason);
}

FlowModel::~FlowModel() = default;

std::size_t FlowModel::num_examples(train::Split split) const {
  return splits_[std::size_t(split)].size();
}

std::span<const nlohmann::json> FlowModel::examples(train::Split split) const {
  return splits_[std::size_t(split)];
}

std::vector<nlohmann::json>& FlowModel::split_examples(train::Split split) {
  return splits_[std::size_t(split)];
}

void FlowModel::generate_splits(const ModelInit& init,
                                const std::function<nlohmann::json(const nlohmann::json&)>& make,
                                std::int64_t default_train, std::int64_t default_eval) {
  generate_expression_splits(options_, init.use, default_train, default_eval,
                             [&](train::Split split, const CalculatorExample& e) {
                               split_examples(split).push_back(make(e.expression));
                             });
}

DecodeSettings FlowModel::decode_settings() const {
  return DecodeSettings{.beam = int(options_.integer("beam")),
                        .length_penalty = options_.number("length_penalty")};
}

std::vector<std::unique_ptr<DecodeJob>> FlowModel::encode(flow::Engine& engine,
                                                          std::span<const nlohmann::json> examples,
                                                          const DecodeSettings& settings) {
  if (settings.beam < 0)
    fail(name(), "the beam width must be 0 (greedy) or more, got ", settings.beam);
  const std::uint32_t first_node = std::uint32_t(engine.tape().size());
  std::vector<std::unique_ptr<Encoding>> encodings =
      encode_batch(engine, examples, settings.joining);
  engine.drop_intermediates(first_node);  // the encoder's, once its outputs are imported
  std::vector<std::unique_ptr<DecodeJob>> jobs;
  jobs.reserve(encodings.size());
  for (auto& encoding : encodings) jobs.push_back(decode_job(std::move(encoding), settings));
  return jobs;
}

std::vector<nlohmann::json> FlowModel::predict(std::span<const nlohmann::json> examples) {
  return decode(examples, decode_settings());
}

std::vector<nlohmann::json> FlowModel::batch_examples(const train::Batch& batch) const {
  const std::span<const nlohmann::json> all = examples(batch.split);
  std::vector<nlohmann::json> out;
  out.reserve(batch.example_ids.size());
  for (std::size_t id : batch.example_ids) {
    if (id >= all.size())
      fail(name(), "example ", id, " is out of range: the split has ", all.size());
    out.push_back(all[id]);
  }
  return out;
}

// Every example's gold decisions issued through one engine: one static weave for the
// encoders, then the teacher-forced steps (no reads, so one more step), gathered into one loss.
train::BatchFigures FlowModel::teacher_forcing(std::span<const nlohmann::json> batch, bool training,
                                               Rng* rng) {
  tape_.clear();
  tape_.set_grad_enabled(training);
  TapeScope scope(tape_);
  nn::ForwardMode mode(training, rng);
  flow::Engine engine(loom_, tape_, {.drop_step_intermediates = !training}, store_.device());
  const std::vector<std::unique_ptr<Encoding>> encodings = encode_batch(engine, batch, false);
  std::vector<Targets> targets(batch.size());
  for (std::size_t e = 0; e < batch.size(); ++e)
    engine.admit([&, e](flow::Context& ctx) {
      return teacher_program(ctx, *encodings[e], batch[e], targets[e]);
    });
  engine.run();
  std::vector<flow::Val> decisions;
  std::vector<std::int32_t> gold;
  for (std::size_t e = 0; e < batch.size(); ++e) {
    if (engine.state(e) != flow::ProgramState::kDone) fail(name(), engine.error(e));
    decisions.insert(decisions.end(), targets[e].log_probs.begin(), targets[e].log_probs.end());
    gold.insert(gold.end(), targets[e].gold.begin(), targets[e].gold.end());
  }
  train::BatchFigures figures;
  figures.examples = std::int64_t(batch.size());
  if (decisions.empty()) return figures;
  const Var log_probs = engine.gather(decisions);
  const Tensor labels = Tensor::from_vector({std::int64_t(gold.size())}, gold, store_.device());
  // log_probs are log-softmaxed already; log_softmax is idempotent, so this is their NLL.
  const Var losses = softmax_cross_entropy(log_probs, labels);
  const Var total = sum(losses);
  figures.loss_sum = double(total.value().item());
  if (!training) figures.loss_terms = losses.value().to_float_vector();  // summed exactly
  figures.metrics.add_hits(
      "decision_accuracy",
      train::argmax_hits(log_probs.value().to(Device::kCpu), labels.to(Device::kCpu)),
      std::int64_t(gold.size()));
  if (training) tape_.backward(total * (1.0f / float(batch.size())));
  return figures;
}

train::BatchFigures FlowModel::train_batch(const train::Batch& batch, Rng& rng) {
  return teacher_forcing(batch_examples(batch), true, &rng);
}

train::BatchFigures FlowModel::eval_batch(const train::Batch& batch) {
  const std::vector<nlohmann::json> chosen = batch_examples(batch);
  train::BatchFigures figures = teacher_forcing(chosen, false, nullptr);
  auto count_matches = [&](const DecodeSettings& settings) {
    const std::vector<nlohmann::json> answers = decode(chosen, settings);
    std::int64_t hits = 0;
    for (std::size_t e = 0; e < chosen.size(); ++e) hits += exact_match(answers[e], chosen[e]);
    return hits;
  };
  const std::int64_t total = std::int64_t(chosen.size());
  figures.metrics.add_hits("exact_match", count_matches(DecodeSettings{.beam = 0}), total);
  const int eval_beam = int(options_.integer("eval_beam"));
  if (batch.split == train::Split::kTest && eval_beam > 0) {
    const DecodeSettings beam{.beam = eval_beam,
                              .length_penalty = options_.number("length_penalty")};
    figures.metrics.add_hits("exact_match_beam", count_matches(beam), total);
  }
  return figures;
}

double FlowModel::majority_rate(train::Split split) const {
  std::map<std::string, std::int64_t> counts;
  for (const nlohmann::json& e : examples(train::Split::kTrain)) ++counts[e["expression"].dump()];
  if (counts.empty() || examples(split).empty()) return 0;
  const auto most =
      std::max_element(counts.begin(), counts.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  std::int64_t hits = 0;
  for (const nlohmann::json& e : examples(split)) hits += e["expression"].dump() == most->first;
  return double(hits) / double(examples(split).size());
}

std::vector<std::string> FlowModel::split_notes(train::Split split) const {
  if (num_examples(split) == 0 || num_examples(train::Split::kTrain) == 0) return {};
  return {fmt::format(
      "{} most frequent training expression: exact match {:.3f} (the rate of always answering it)",
      train::split_name(split), majority_rate(split))};
}

}  // namespace weft::models
