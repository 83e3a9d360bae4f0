// The models that decode with flow programs (tree2seq, seq2tree): their gradients, through the
// decoder's steps and the encoder's static weave, against finite differences; a batch decoded
// together equals its examples decoded one at a time (greedy and beam); beam width 1 gives
// greedy's answers; a short training run beats always answering the most frequent expression;
// malformed input is named with what and where.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <set>

#include "op_test_util.h"
#include "weft/core/error.h"
#include "weft/models/flow_model.h"
#include "weft/models/registry.h"

namespace weft::models {
namespace {

using weft::testing::expect_error;

std::unique_ptr<Model> tiny(const std::string& name,
                            nlohmann::json overrides = nlohmann::json::object()) {
  OptionValues options = find_model(name).default_options();
  nlohmann::json values = {
      {"hidden", 4}, {"max_depth", 2}, {"max_train", 6}, {"max_eval", 12}, {"seed", 11}};
  values.update(overrides);
  options.update(values, "test");
  return create_model(options);
}

class DecodingModels : public ::testing::TestWithParam<std::string> {};

// Random weights of a larger scale than the initialisers', so every path carries gradient and
// an untrained model's decisions vary (trees of many shapes, texts of many lengths).
void scramble(Model& model) {
  std::uint64_t seed = 100;
  for (Parameter p : model.parameters()) {
    p.value() = weft::testing::random_tensor(p.value().shape(), seed++, -0.8f, 0.8f);
    p.zero_grad();
  }
  // seq2tree's operators (decisions 10-12) a little more likely, so its trees grow.
  if (model.name() == "seq2tree")
    for (Parameter p : model.parameters())
      if (p.name() == "decoder/scores/bias")
        for (int op = 10; op < 13; ++op) p.value().data<float>()[op] += 3.5f;
}

// The mean teacher-forced loss of a batch, as train_batch backpropagates it.
double mean_loss(Model& model, std::span<const std::size_t> ids) {
  const train::BatchFigures f = model.eval_batch(train::Batch{train::Split::kTrain, ids});
  return f.loss_sum / double(f.examples);
}

TEST_P(DecodingModels, GradientsMatchFiniteDifferences) {
  std::unique_ptr<Model> model = tiny(GetParam());
  const std::vector<std::size_t> ids{0, 1, 2, 3, 4, 5};
  scramble(*model);
  Rng rng(1);
  model->train_batch(train::Batch{train::Split::kTrain, ids}, rng);
  int checked = 0, encoder_nonzero = 0;
  for (Parameter p : model->parameters()) {
    const std::vector<float> grad = p.grad().to_float_vector();
    const std::size_t stride = std::max<std::size_t>(1, grad.size() / 5);
    weft::testing::check_finite_differences(
        GetParam() + " " + p.name(), std::span<float>(p.value().data<float>(), grad.size()), grad,
        [&] { return mean_loss(*model, ids); }, /*step=*/1e-2, /*abs_tol=*/3e-3,
        /*rel_tol=*/3e-2, stride);
    for (std::size_t i = 0; i < grad.size(); i += stride) {
      ++checked;
      if (p.name().starts_with("encoder/") && std::abs(grad[i]) > 1e-6f) ++encoder_nonzero;
    }
  }
  EXPECT_GT(checked, 30);
  EXPECT_GT(encoder_nonzero, 3);  // the loss reaches the encoder through the decoder's steps
}

// Answers equal up to float noise in the log-probabilities.
void expect_same_answer(const nlohmann::json& got, const nlohmann::json& want,
                        const std::string& where) {
  EXPECT_EQ(got["text"], want["text"]) << where;
  EXPECT_EQ(got["length"], want["length"]) << where;
  EXPECT_NEAR(got["log_prob"].get<double>(), want["log_prob"].get<double>(), 1e-4) << where;
  if (want.contains("expression")) {
    EXPECT_EQ(got["expression"], want["expression"]) << where;
  }
  if (want.contains("beams")) {
    ASSERT_EQ(got["beams"].size(), want["beams"].size()) << where;
    for (std::size_t k = 0; k < want["beams"].size(); ++k)
      EXPECT_EQ(got["beams"][k]["text"], want["beams"][k]["text"]) << where << " beam " << k;
  }
}

TEST_P(DecodingModels, ABatchDecodesAsItsExamplesAlone) {
  std::unique_ptr<Model> model = tiny(GetParam(), {{"hidden", 16}, {"max_depth", 3}});
  scramble(*model);
  DecodingModel* decoder = model->decoding();
  ASSERT_NE(decoder, nullptr);
  const std::span<const nlohmann::json> examples = model->examples(train::Split::kDev);
  for (int beam : {0, 3}) {
    const DecodeSettings settings{.beam = beam};
    const std::vector<nlohmann::json> together = decoder->decode(examples, settings);
    ASSERT_EQ(together.size(), examples.size());
    std::set<std::size_t> lengths;
    for (std::size_t e = 0; e < examples.size(); ++e) {
      const std::vector<nlohmann::json> alone = decoder->decode(examples.subspan(e, 1), settings);
      expect_same_answer(together[e], alone[0],
                         "beam " + std::to_string(beam) + ", example " + std::to_string(e));
      lengths.insert(together[e]["length"].get<std::size_t>());
    }
    EXPECT_GT(lengths.size(), 1u);  // the batch's outputs differed in length
  }
}

TEST_P(DecodingModels, BeamWidthOneGivesGreedyAnswers) {
  std::unique_ptr<Model> model = tiny(GetParam(), {{"hidden", 16}, {"max_depth", 3}});
  scramble(*model);
  const std::span<const nlohmann::json> examples = model->examples(train::Split::kDev);
  const auto greedy = model->decoding()->decode(examples, DecodeSettings{.beam = 0});
  const auto beam = model->decoding()->decode(examples, DecodeSettings{.beam = 1});
  for (std::size_t e = 0; e < examples.size(); ++e) {
    ASSERT_EQ(beam[e]["beams"].size(), 1u);
    expect_same_answer(beam[e], greedy[e], "example " + std::to_string(e));
  }
}

TEST_P(DecodingModels, ShortTrainingBeatsTheMostFrequentAnswer) {
  std::unique_ptr<Model> model = tiny(
      GetParam(),
      {{"hidden", 32}, {"max_depth", 1}, {"max_train", 1500}, {"max_eval", 100}, {"eval_beam", 3}});
  train::TrainerOptions options = find_model(GetParam()).training_options(model->options());
  // A constant rate: the recipe's cosine schedule needs its 8 epochs.
  options.update({{"epochs", 3}, {"batch_size", 32}, {"progress", "off"}, {"schedule", "constant"}},
                 "test");
  train::Trainer trainer(options);
  trainer.fit(*model);
  const train::MetricSet test = trainer.evaluate(*model, train::Split::kTest);
  const double baseline = static_cast<FlowModel&>(*model).majority_rate(train::Split::kTest);
  EXPECT_GT(test.value("exact_match"), baseline + 0.4) << test.to_json();
  EXPECT_GT(test.value("exact_match_beam"), baseline + 0.4) << test.to_json();
}

INSTANTIATE_TEST_SUITE_P(Models, DecodingModels, ::testing::Values("tree2seq", "seq2tree"));

TEST(DecodingModels, MalformedInputIsNamedWithWhatAndWhere) {
  std::unique_ptr<Model> tree = tiny("tree2seq");
  expect_error(
      [&] {
        tree->parse_example(R"({"op": "/", "left": {"number": 1}, "right": {"number": 2}})",
                            "in.jsonl:3");
      },
      {"[tree2seq] in.jsonl:3: ", "unknown op \"/\""});
  expect_error([&] { tree->parse_example(R"({"number": 12})", "in.jsonl:4"); },
               {"[tree2seq] in.jsonl:4: ", "must be a digit 0-9, got 12"});
  std::unique_ptr<Model> text = tiny("seq2tree");
  expect_error([&] { text->parse_example("(3 + x)", "in.txt:2"); },
               {"[seq2tree] in.txt:2: column 6: unexpected character 'x'"});
  expect_error([&] { text->parse_example("(3 + 4", "in.txt:5"); },
               {"[seq2tree] in.txt:5: the text ends where ')' was expected"});
  expect_error([&] { text->parse_example("3 4", "in.txt:6"); },
               {"[seq2tree] in.txt:6: column 3: expected an operator or the end of the expression, "
                "got '4'"});
  expect_error([&] { text->parse_example(R"({"text": 7})", "in.txt:7"); },
               {"[seq2tree] in.txt:7: expected {\"text\": \"...\"}"});
  // A bad example handed straight to decode (Python dicts skip parse_example) names its index.
  const std::vector<nlohmann::json> batch{tree->examples(train::Split::kDev)[0],
                                          {{"expression", {{"number", -1}}}}};
  expect_error([&] { tree->predict(batch); }, {"[tree2seq] example 1: ", "must be a digit"});
  expect_error(
      [&] { tree->decoding()->decode(std::span(batch).first(1), DecodeSettings{.beam = -2}); },
      {"[tree2seq] the beam width must be 0 (greedy) or more, got -2"});
}

}  // namespace
}  // namespace weft::models
