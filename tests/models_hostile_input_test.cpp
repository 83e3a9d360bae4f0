// Hostile input at the models' doors (issue 13): a checkpoint whose stored options ask for
// more parameters than the file holds, and example lines that nest deep, hide a huge number in
// a digit, end in CRLF or are not UTF-8. Each gets one weft::Error naming what and where.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "io_test_util.h"
#include "models/sentiment_data.h"
#include "weft/core/error.h"
#include "weft/io/input_limits.h"
#include "weft/io/vocabulary.h"
#include "weft/models/registry.h"
#include "weft/models/saved_model.h"
#include "weft/train/checkpoint.h"

namespace weft::models {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

class HostileModelInput : public weft::testing::IoTempDir {
 protected:
  std::unique_ptr<Model> small_calculator() {
    OptionValues options = find_model("calculator").default_options();
    options.update({{"hidden", 4}, {"max_train", 8}, {"max_eval", 4}}, "test");
    return create_model(options);
  }
};

// A hidden size inside the option's range, but far more parameters than the file holds: the
// model is not built (which would allocate gigabytes), the budget error names the file.
TEST_F(HostileModelInput, StoredOptionsCannotAskForMoreParametersThanTheFileHolds) {
  std::unique_ptr<Model> model = small_calculator();
  json stored = json::parse(model->config_json());
  stored["options"]["hidden"] = 60000;
  const std::string path = (dir_ / "forged.safetensors").string();
  const std::vector<Parameter> parameters = model->parameters();
  train::save_checkpoint(path, parameters, nullptr, {},
                         {"calculator", json{{"model", stored}}.dump()});
  EXPECT_THAT([&] { load_model(path, ModelUse::kInfer); },
              ThrowsMessage<Error>(HasSubstr("forged.safetensors' (")));
  EXPECT_THAT([&] { load_model(path, ModelUse::kInfer); },
              ThrowsMessage<Error>(HasSubstr("can hold")));
  // The genuine checkpoint of the same model still loads.
  const std::string good = (dir_ / "good.safetensors").string();
  save_model(good, *model);
  EXPECT_NO_THROW(load_model(good, ModelUse::kInfer));
}

TEST_F(HostileModelInput, CalculatorLinesCannotNestDeepOrHideBigNumbers) {
  std::unique_ptr<Model> model = small_calculator();
  std::string deep;
  for (int i = 0; i < 70000; ++i) deep += R"({"op": "+", "right": {"number": 1}, "left": )";
  deep += R"({"number": 1})" + std::string(70000, '}');
  EXPECT_THAT([&] { model->parse_example(deep, "in.jsonl:4"); },
              ThrowsMessage<Error>(HasSubstr("[calculator] in.jsonl:4:")));
  std::string arrays(70000, '[');
  EXPECT_THAT([&] { model->parse_example(arrays, "in.jsonl:5"); },
              ThrowsMessage<Error>(HasSubstr("JSON nested deeper than")));
  // 2^32 + 1 read as an int would be the digit 1.
  EXPECT_THAT([&] { model->parse_example(R"({"number": 4294967297})", "in.jsonl:6"); },
              ThrowsMessage<Error>(HasSubstr("must be a digit 0-9")));
  EXPECT_THAT([&] { model->parse_example(R"({"number": 1e400})", "in.jsonl:7"); },
              ThrowsMessage<Error>(HasSubstr("in.jsonl:7")));
  const std::vector<json> predictions =
      model->predict(std::vector<json>{model->parse_example(R"({"number": 3})", "ok")});
  ASSERT_EQ(predictions.size(), 1u);
}

TEST(HostileSentimentLines, CrLfIsAnEndOfLineAndBadUtf8IsRefused) {
  io::Vocabulary vocabulary = io::Vocabulary::with_unknown();
  vocabulary.add("good");
  const json plain = sentiment_example_from_text("(3 (2 a) (4 good))", "x", vocabulary);
  EXPECT_EQ(sentiment_example_from_text("(3 (2 a) (4 good))\r", "x", vocabulary), plain);
  EXPECT_THAT(
      [&] { sentiment_example_from_text("(3 (2 a) (4 go\xffod))", "in.txt:2", vocabulary); },
      ThrowsMessage<Error>(HasSubstr("in.txt:2: byte 15 is not UTF-8")));
  std::string deep;
  for (int i = 0; i < 70000; ++i) deep += "(2 ";
  EXPECT_THAT([&] { sentiment_example_from_text(deep, "in.txt:3", vocabulary); },
              ThrowsMessage<Error>(HasSubstr("WEFT_LIMIT_TREE_DEPTH")));
  std::string deep_json;
  for (int i = 0; i < 70000; ++i) deep_json += R"({"label": 2, "children": [)";
  EXPECT_THAT([&] { sentiment_example_from_text(deep_json, "in.txt:4", vocabulary); },
              ThrowsMessage<Error>(HasSubstr("WEFT_LIMIT_JSON_DEPTH")));
}

}  // namespace
}  // namespace weft::models
