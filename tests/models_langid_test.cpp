// The hierarchical language-identification RNN: words split on whitespace (CJK sentences are
// one word), the Tatoeba splits (test overlap removed, seeded 10% dev), bad records skipped or
// rejected with file and line, and a short run on a small slice whose loss falls and which
// beats chance (1 in 10).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "io_test_util.h"
#include "weft/core/error.h"
#include "weft/models/langid.h"
#include "weft/models/registry.h"

namespace weft::models {
namespace {

using ::testing::HasSubstr;
using Words = std::vector<std::vector<std::int32_t>>;

TEST(LangIdWords, SplitsOnWhitespaceAndDecodesUtf8) {
  EXPECT_EQ(langid_words("  Hi  yo "), (Words{{'H', 'i'}, {'y', 'o'}}));
  EXPECT_EQ(langid_words("\xc3\xa9t\xc3\xa9"), (Words{{0xE9, 't', 0xE9}}));        // "été"
  EXPECT_EQ(langid_words("\xe4\xbd\xa0\xe5\xa5\xbd"), (Words{{0x4F60, 0x597D}}));  // one CJK word
  EXPECT_EQ(langid_words("a\xff"), (Words{{'a', 0xFFFD}}));
  EXPECT_TRUE(langid_words(" \t ").empty());
}

OptionValues small_langid() {
  OptionValues options = find_model("langid").default_options();
  options.update({{"data_dir", weft::testing::io_data_path("")},
                  {"char_embedding", 16},
                  {"char_hidden", 32},
                  {"hidden", 32},
                  {"max_train", 400},
                  {"max_eval", 100},
                  {"seed", 2}},
                 "test");
  return options;
}

TEST(LangIdModel, SplitsRemoveTheTestOverlapAndHoldOutDev) {
  WEFT_REQUIRE_DATA("tatoeba-langid/testset.csv");
  OptionValues options = small_langid();
  options.update({{"max_train", 0}, {"max_eval", 0}}, "test");
  LangIdModel model(options);
  EXPECT_EQ(model.languages().size(), 10u);
  EXPECT_EQ(model.overlap_removed(), 104);
  EXPECT_EQ(model.num_examples(train::Split::kDev), 989u);  // 10% of 10000 - 104
  EXPECT_EQ(model.num_examples(train::Split::kTrain), 10000u - 104u - 989u);
  EXPECT_EQ(model.num_examples(train::Split::kTest), 2000u);
  const nlohmann::json example = model.parse_example("1\tfra\tC'est la vie", "x:1");
  EXPECT_EQ(example["words"].size(), 3u);
  EXPECT_EQ(model.languages()[example["label"].get<std::size_t>()], "fra");
  EXPECT_THAT([&] { model.parse_example("   ", "in.txt:4"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("in.txt:4: empty sentence")));
}

class LangIdBadRecords : public weft::testing::IoTempDir {};

TEST_F(LangIdBadRecords, EmptySentencesAreSkippedOrRejected) {
  std::filesystem::create_directories(dir_ / "tatoeba-langid");
  write_file("tatoeba-langid/eng_3.csv", "1\teng\tHello there\n2\teng\t \n3\teng\tGood night\n");
  write_file("tatoeba-langid/fra_2.csv", "4\tfra\tBonjour\n5\tfra\tBonne nuit\n");
  write_file("tatoeba-langid/testset.csv", "6\teng\tHi\n7\tfra\tSalut\n");
  OptionValues options = small_langid();
  options.update({{"data_dir", dir_.string()}, {"max_train", 0}, {"dev_fraction", 0}}, "test");
  LangIdModel model(options);
  ASSERT_EQ(model.skipped().size(), 1u);
  EXPECT_THAT(model.skipped()[0], HasSubstr("eng_3.csv:2: empty sentence (id 2)"));
  EXPECT_EQ(model.num_examples(train::Split::kTrain), 4u);
  options.set("bad_records", "reject", "test");
  EXPECT_THAT([&] { LangIdModel rejecting(options); },
              ::testing::ThrowsMessage<Error>(HasSubstr("eng_3.csv:2: empty sentence")));
}

TEST(LangIdModel, ShortRunLearnsAndBeatsChance) {
  WEFT_REQUIRE_DATA("tatoeba-langid/testset.csv");
  LangIdModel model(small_langid());
  train::TrainerOptions recipe;
  recipe.set("epochs", 4);
  recipe.set("batch_size", 25);
  recipe.set("seed", 3);
  recipe.set("optimizer", "adam");
  recipe.set("learning_rate", 0.01);
  recipe.set("progress", "off");
  train::Trainer trainer(recipe);
  const train::TrainResult result = trainer.fit(model);
  ASSERT_EQ(result.epochs.size(), 4u);
  EXPECT_LT(result.epochs.back().train.value("loss"),
            0.9 * result.epochs.front().train.value("loss"));
  EXPECT_GT(trainer.evaluate(model, train::Split::kTest).value("accuracy"), 0.25);
}

}  // namespace
}  // namespace weft::models
