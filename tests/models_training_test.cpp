// The trainable models end to end through the Trainer: a short SST run on a few hundred trees
// (loss falls, accuracy beats the majority class), the calculator likewise, and predictions
// made for a batch equal those made one example at a time; a resumed SST run with sparse word
// vector updates equals the uninterrupted one; batches prepared ahead train bit for bit as
// batches prepared in turn.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <filesystem>

#include "io_test_util.h"
#include "weft/core/error.h"
#include "weft/models/calculator.h"
#include "weft/models/registry.h"
#include "weft/models/sentiment.h"

namespace weft::models {
namespace {

using ::testing::HasSubstr;

train::TrainerOptions quick_recipe(int epochs, double learning_rate) {
  train::TrainerOptions options;
  options.set("epochs", epochs);
  options.set("batch_size", 16);
  options.set("seed", 3);
  options.set("optimizer", "adagrad");
  options.set("learning_rate", learning_rate);
  options.set("progress", "off");
  options.set("prepare_ahead", true);
  return options;
}

OptionValues small_sentiment() {
  OptionValues options = find_model("sentiment").default_options();
  options.update({{"data_dir", weft::testing::io_data_path("")},
                  {"embeddings", weft::testing::io_data_path("glove-sst/glove.6B.100d.sst.txt")},
                  {"hidden", 24},
                  {"max_train", 240},
                  {"max_eval", 60},
                  {"seed", 5}},
                 "test");
  return options;
}

TEST(SentimentModel, ShortTrainingRunLearns) {
  WEFT_REQUIRE_DATA("sst/train.txt");
  WEFT_REQUIRE_DATA("glove-sst/glove.6B.100d.sst.txt");
  SentimentModel model(small_sentiment());
  EXPECT_EQ(model.num_examples(train::Split::kTrain), 240u);
  EXPECT_GT(model.vectors_found(), model.vocabulary_size() * 9 / 10);

  // The majority label over every node of the training trees.
  std::array<std::int64_t, 5> counts{};
  auto count_nodes = [&](auto& self, const nlohmann::json& node) -> void {
    ++counts[node["label"].get<std::size_t>()];
    if (node.contains("children")) {
      for (const nlohmann::json& child : node["children"]) self(self, child);
    }
  };
  for (const nlohmann::json& tree : model.examples(train::Split::kTrain)) {
    count_nodes(count_nodes, tree);
  }
  std::int64_t total = 0;
  for (std::int64_t c : counts) total += c;
  const double majority = double(*std::max_element(counts.begin(), counts.end())) / double(total);

  train::Trainer trainer(quick_recipe(4, 0.1));
  const train::TrainResult result = trainer.fit(model);
  ASSERT_EQ(result.epochs.size(), 4u);
  EXPECT_LT(result.epochs.back().train.value("loss"),
            0.8 * result.epochs.front().train.value("loss"));
  const train::MetricSet fitted = trainer.evaluate(model, train::Split::kTrain);
  EXPECT_GT(fitted.value("all_fine"), majority + 0.02) << "majority " << majority;
  EXPECT_GT(fitted.value("root_binary"), 0.6);
}

TEST(SentimentModel, BatchedPredictionsEqualOneAtATime) {
  WEFT_REQUIRE_DATA("sst/dev.txt");
  OptionValues options = small_sentiment();
  options.update({{"no_embeddings", true}, {"max_train", 20}}, "test");  // no need for GloVe
  SentimentModel model(options);
  const auto examples = model.examples(train::Split::kDev).subspan(0, 12);
  const std::vector<nlohmann::json> batched = model.predict(examples);
  for (std::size_t i = 0; i < examples.size(); ++i) {
    const std::vector<nlohmann::json> single = model.predict(examples.subspan(i, 1));
    ASSERT_EQ(single.size(), 1u);
    EXPECT_EQ(single[0]["label"], batched[i]["label"]) << i;
    const auto& a = single[0]["probabilities"];
    const auto& b = batched[i]["probabilities"];
    for (std::size_t k = 0; k < 5; ++k) EXPECT_NEAR(a[k].get<double>(), b[k].get<double>(), 2e-6);
  }
}

TEST(SentimentModel, ParsesTreesAndRejectsNonBinaryOnes) {
  WEFT_REQUIRE_DATA("sst/dev.txt");
  OptionValues options = small_sentiment();
  options.update({{"no_embeddings", true}, {"max_train", 20}}, "test");
  SentimentModel model(options);
  const nlohmann::json tree = model.parse_example("(3 (2 a) (4 good))", "x:1");
  EXPECT_EQ(tree["label"], 3);
  EXPECT_EQ(tree["children"].size(), 2u);
  EXPECT_EQ(model.predict(std::span(&tree, 1)).size(), 1u);
  EXPECT_THAT([&] { model.parse_example("(3 (2 a) (2 b) (4 good))", "in.txt:7"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("in.txt:7: the binary Tree-LSTM")));
  EXPECT_THAT([&] { model.parse_example("(3 (2 a) (4 good)", "in.txt:8"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("in.txt:8")));
}

// The sentiment model's word vectors take row-sparse gradients and lazy updates, whose result
// depends on the optimizer state of rows a batch did not touch: a run resumed from its
// checkpoint must still equal the uninterrupted one, value for value (Adam, weight decay).
TEST(SentimentModel, ResumeWithSparseWordVectorsEqualsUninterrupted) {
  WEFT_REQUIRE_DATA("sst/dev.txt");
  OptionValues options = small_sentiment();
  options.update({{"no_embeddings", true},
                  {"embedding_dim", 8},
                  {"hidden", 8},
                  {"max_train", 48},
                  {"max_eval", 8}},
                 "test");
  train::TrainerOptions recipe = quick_recipe(2, 0.01);
  recipe.set("optimizer", "adam");
  recipe.set("weight_decay", 0.01);
  recipe.set("embedding_lr_scale", 0.5);
  const std::string checkpoint =
      (std::filesystem::temp_directory_path() / "weft_sparse_resume.safetensors").string();
  SentimentModel straight(options);
  train::Trainer(recipe).fit(straight);
  {
    SentimentModel first(options);
    train::TrainerOptions half = recipe;
    half.set("epochs", 1);
    half.set("checkpoint", checkpoint);
    train::Trainer(half).fit(first);
  }
  SentimentModel resumed(options);
  recipe.set("resume", checkpoint);
  train::Trainer(recipe).fit(resumed);
  std::filesystem::remove(checkpoint);
  const std::vector<Parameter> a = straight.parameters(), b = resumed.parameters();
  ASSERT_EQ(a.size(), b.size());
  bool saw_sparse_table = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    saw_sparse_table = saw_sparse_table || a[i].sparse_grad();
    EXPECT_EQ(a[i].value().to_float_vector(), b[i].value().to_float_vector()) << a[i].name();
  }
  EXPECT_TRUE(saw_sparse_table);
}

TEST(CalculatorModel, ShortTrainingRunBeatsTheMajorityClass) {
  OptionValues options = find_model("calculator").default_options();
  options.update({{"hidden", 32}, {"max_train", 3000}, {"max_eval", 400}}, "test");
  CalculatorModel model(options);
  train::TrainerOptions recipe = quick_recipe(3, 0.003);
  recipe.set("optimizer", "adam");
  recipe.set("batch_size", 32);
  train::Trainer trainer(recipe);
  const train::TrainResult result = trainer.fit(model);
  EXPECT_LT(result.epochs.back().train.value("loss"), result.epochs.front().train.value("loss"));
  const double accuracy = trainer.evaluate(model, train::Split::kTest).value("accuracy");
  EXPECT_GT(accuracy, model.majority_rate(train::Split::kTest) + 0.1);
}

TEST(CalculatorModel, PreparingAheadChangesNoBit) {
  // Batches woven, scheduled and planned on a helper thread while the one before trains, or in
  // turn: the same losses, figures and weights, to the last bit (dropout draws included).
  OptionValues options = find_model("calculator").default_options();
  options.update({{"hidden", 16}, {"max_train", 400}, {"max_eval", 100}}, "test");
  std::vector<train::TrainResult> results;
  std::vector<std::vector<std::vector<float>>> weights;
  for (const bool ahead : {true, false}) {
    CalculatorModel model(options);
    train::TrainerOptions recipe = quick_recipe(2, 0.01);
    recipe.set("prepare_ahead", ahead);
    results.push_back(train::Trainer(recipe).fit(model));
    weights.emplace_back();
    for (const Parameter& p : model.parameters())
      weights.back().push_back(p.value().to_float_vector());
  }
  ASSERT_EQ(results[0].epochs.size(), 2u);
  for (std::size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(results[0].epochs[e].train.value("loss"), results[1].epochs[e].train.value("loss"));
    EXPECT_EQ(results[0].epochs[e].dev.value("loss"), results[1].epochs[e].dev.value("loss"));
    EXPECT_EQ(results[0].epochs[e].dev.value("accuracy"),
              results[1].epochs[e].dev.value("accuracy"));
  }
  EXPECT_EQ(weights[0], weights[1]);
}

}  // namespace
}  // namespace weft::models
