// The feed-forward attention model on SST sentences: a tree is read as its words and root
// label, each sentence's attention weights are positive and sum to one (one per word, with no
// padding), and a short training run's loss falls.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "io_test_util.h"
#include "weft/models/attention.h"
#include "weft/models/registry.h"

namespace weft::models {
namespace {

OptionValues small_attention() {
  OptionValues options = find_model("attention").default_options();
  options.update({{"data_dir", weft::testing::io_data_path("")},
                  {"embeddings", weft::testing::io_data_path("glove-sst/glove.6B.100d.sst.txt")},
                  {"hidden", 32},
                  {"attention_hidden", 16},
                  {"max_train", 300},
                  {"max_eval", 40},
                  {"seed", 4}},
                 "test");
  return options;
}

TEST(AttentionModel, ReadsTreesAsWordSequences) {
  WEFT_REQUIRE_DATA("sst/dev.txt");
  OptionValues options = small_attention();
  options.update({{"no_embeddings", true}, {"max_train", 20}}, "test");  // no need for GloVe
  AttentionModel model(options);
  const nlohmann::json sentence = model.parse_example("(3 (2 a) (4 (2 very) (4 good)))", "x:1");
  EXPECT_EQ(sentence["label"], 3);
  ASSERT_EQ(sentence["ids"].size(), 3u);
  EXPECT_TRUE(model.skipped().empty());
  EXPECT_EQ(model.num_examples(train::Split::kTrain), 20u);
}

TEST(AttentionModel, WeightsOfEachSentenceSumToOne) {
  WEFT_REQUIRE_DATA("sst/dev.txt");
  OptionValues options = small_attention();
  options.update({{"no_embeddings", true}, {"max_train", 20}}, "test");
  AttentionModel model(options);
  const auto examples = model.examples(train::Split::kDev).subspan(0, 10);
  const std::vector<nlohmann::json> predictions = model.predict(examples);
  ASSERT_EQ(predictions.size(), examples.size());
  for (std::size_t i = 0; i < examples.size(); ++i) {
    const nlohmann::json& alpha = predictions[i]["attention"];
    ASSERT_EQ(alpha.size(), examples[i]["ids"].size()) << i;
    double total = 0;
    for (const nlohmann::json& a : alpha) {
      EXPECT_GT(a.get<double>(), 0.0);
      total += a.get<double>();
    }
    EXPECT_NEAR(total, 1.0, 1e-5) << i;
  }
  // Batching does not change a sentence's weights.
  const std::vector<nlohmann::json> single = model.predict(examples.subspan(3, 1));
  for (std::size_t t = 0; t < single[0]["attention"].size(); ++t) {
    EXPECT_NEAR(single[0]["attention"][t].get<double>(),
                predictions[3]["attention"][t].get<double>(), 1e-6);
  }
}

TEST(AttentionModel, ShortTrainingRunLossFalls) {
  WEFT_REQUIRE_DATA("sst/train.txt");
  WEFT_REQUIRE_DATA("glove-sst/glove.6B.100d.sst.txt");
  AttentionModel model(small_attention());
  train::TrainerOptions recipe;
  recipe.set("epochs", 4);
  recipe.set("batch_size", 20);
  recipe.set("seed", 3);
  recipe.set("optimizer", "adam");
  recipe.set("learning_rate", 0.005);
  recipe.set("progress", "off");
  train::Trainer trainer(recipe);
  const train::TrainResult result = trainer.fit(model);
  ASSERT_EQ(result.epochs.size(), 4u);
  EXPECT_LT(result.epochs.back().train.value("loss"),
            0.95 * result.epochs.front().train.value("loss"));
  EXPECT_GT(trainer.evaluate(model, train::Split::kTrain).value("root_binary"), 0.6);
}

}  // namespace
}  // namespace weft::models
