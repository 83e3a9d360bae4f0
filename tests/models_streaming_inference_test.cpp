// The streaming inference driver (models/streaming_inference.h): predictions equal one
// predict() over the whole input, in input order, for every batch size and number of weave
// threads; keys come from the source or the key function; memory stays within
// (batches_ahead + 1) batches on a long stream; an ensemble streams too; and an error in the
// source or in a batch reaches the caller after the predictions before it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "io_test_util.h"
#include "weft/core/error.h"
#include "weft/models/ensemble.h"
#include "weft/models/registry.h"
#include "weft/models/saved_model.h"
#include "weft/models/streaming_inference.h"

namespace weft::models {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// A small untrained calculator (no data needed) and its dev examples.
std::unique_ptr<Model> calculator(int seed) {
  OptionValues o = find_model("calculator").default_options();
  o.update({{"hidden", 8}, {"max_train", 16}, {"max_eval", 40}, {"seed", seed}}, "test");
  return create_model(o);
}

std::vector<json> dev_examples(const Model& model) {
  const std::span<const json> dev = model.examples(train::Split::kDev);
  return {dev.begin(), dev.end()};
}

// A source over `examples`, cycled to `count` examples.
ExampleSource cycling(const std::vector<json>& examples, std::size_t count) {
  auto next = std::make_shared<std::size_t>(0);
  return [&examples, count, next](StreamExample& out) {
    if (*next == count) return false;
    out.example = examples[(*next)++ % examples.size()];
    return true;
  };
}

// Predictions of different batchings agree to float rounding (GEMMs of other shapes may sum
// in another order): the same sign, probabilities within 1e-5.
void expect_same_prediction(const json& got, const json& expected, std::size_t example) {
  SCOPED_TRACE("example " + std::to_string(example));
  EXPECT_EQ(got.at("sign"), expected.at("sign"));
  const auto p = got.at("probabilities").get<std::vector<double>>();
  const auto q = expected.at("probabilities").get<std::vector<double>>();
  ASSERT_EQ(p.size(), q.size());
  for (std::size_t k = 0; k < p.size(); ++k) EXPECT_NEAR(p[k], q[k], 1e-5);
}

struct Collected {
  std::vector<StreamedPrediction> predictions;
  PredictionSink sink() {
    return [this](StreamedPrediction& p) { predictions.push_back(p); };
  }
};

TEST(StreamingInference, PredictionsEqualOnePredictInInputOrder) {
  std::unique_ptr<Model> model = calculator(1);
  const std::vector<json> examples = dev_examples(*model);
  ASSERT_EQ(examples.size(), 40u);
  const std::vector<json> expected = model->predict(examples);
  for (const int threads : {0, 1, 3}) {
    for (const std::int64_t batch : {1, 7, 64}) {
      SCOPED_TRACE("batches_ahead " + std::to_string(threads) + ", batch " + std::to_string(batch));
      StreamingOptions options;
      options.batch_size = batch;
      options.batches_ahead = threads;
      Collected out;
      const StreamingStats stats =
          predict_stream(*model, cycling(examples, examples.size()), out.sink(), options);
      ASSERT_EQ(out.predictions.size(), expected.size());
      for (std::size_t i = 0; i < expected.size(); ++i) {
        EXPECT_EQ(out.predictions[i].index, std::int64_t(i));
        expect_same_prediction(out.predictions[i].prediction, expected[i], i);
        EXPECT_TRUE(out.predictions[i].key.is_null());
      }
      EXPECT_EQ(stats.examples, 40);
      EXPECT_EQ(stats.batches, (40 + batch - 1) / batch);
    }
  }
}

TEST(StreamingInference, KeysComeFromTheSourceOrTheKeyFunction) {
  std::unique_ptr<Model> model = calculator(2);
  const std::vector<json> examples = dev_examples(*model);
  std::size_t next = 0;
  const ExampleSource source = [&](StreamExample& out) {
    if (next == 10) return false;
    out.example = examples[next];
    if (next % 3 == 0) out.key = "given-" + std::to_string(next);
    ++next;
    return true;
  };
  StreamingOptions options;
  options.batch_size = 4;
  options.key = [](const json& example, std::int64_t index) {
    return json{{"index", index}, {"sign", example.at("sign")}};
  };
  Collected out;
  predict_stream(*model, source, out.sink(), options);
  ASSERT_EQ(out.predictions.size(), 10u);
  for (std::size_t i = 0; i < 10; ++i) {
    const json expected_key = i % 3 == 0 ? json("given-" + std::to_string(i))
                                         : json{{"index", i}, {"sign", examples[i].at("sign")}};
    EXPECT_EQ(out.predictions[i].key, expected_key) << "example " << i;
  }
}

TEST(StreamingInference, ALongStreamIsHeldAFewBatchesAtATime) {
  std::unique_ptr<Model> model = calculator(3);
  const std::vector<json> examples = dev_examples(*model);
  const std::vector<json> expected = model->predict(examples);
  StreamingOptions options;
  options.batch_size = 8;
  options.batches_ahead = 2;
  std::int64_t seen = 0;
  const PredictionSink check = [&](StreamedPrediction& p) {
    ASSERT_EQ(p.index, seen);
    expect_same_prediction(p.prediction, expected[std::size_t(seen) % expected.size()],
                           std::size_t(seen));
    ++seen;
  };
  const StreamingStats stats = predict_stream(*model, cycling(examples, 4000), check, options);
  EXPECT_EQ(seen, 4000);
  EXPECT_EQ(stats.examples, 4000);
  EXPECT_EQ(stats.batches, 500);
  EXPECT_LE(stats.most_examples_held, (options.batches_ahead + 1) * options.batch_size);
  EXPECT_GE(stats.most_examples_held, options.batch_size);
}

TEST(StreamingInference, ErrorsArriveAfterThePredictionsBeforeThem) {
  std::unique_ptr<Model> model = calculator(4);
  const std::vector<json> examples = dev_examples(*model);
  StreamingOptions options;
  options.batch_size = 5;
  // The source fails at its 13th example: the 12 before it are predicted first.
  for (const int threads : {0, 2}) {
    options.batches_ahead = threads;
    std::size_t next = 0;
    const ExampleSource failing = [&](StreamExample& out) {
      if (next == 12) fail("test", "line 13 is unreadable");
      out.example = examples[next++];
      return true;
    };
    Collected out;
    EXPECT_THAT([&] { predict_stream(*model, failing, out.sink(), options); },
                ThrowsMessage<Error>(HasSubstr("line 13 is unreadable")));
    EXPECT_EQ(out.predictions.size(), 12u) << "batches_ahead " << threads;
  }
  // An example the model cannot weave, in the second batch: the first batch is predicted.
  std::vector<json> with_bad(examples.begin(), examples.begin() + 12);
  with_bad[7] = json{{"expression", "not an expression"}, {"sign", 1}};
  for (const int threads : {0, 2}) {
    options.batches_ahead = threads;
    Collected out;
    EXPECT_THAT(
        [&] { predict_stream(*model, cycling(with_bad, with_bad.size()), out.sink(), options); },
        ThrowsMessage<Error>(HasSubstr("calculator: the batch of examples 6-10 (counted from 1)")));
    EXPECT_EQ(out.predictions.size(), 5u) << "batches_ahead " << threads;
  }
}

TEST(StreamingInference, BadOptionsAreNamed) {
  std::unique_ptr<Model> model = calculator(5);
  const std::vector<json> examples = dev_examples(*model);
  Collected out;
  StreamingOptions options;
  options.batch_size = 0;
  EXPECT_THAT([&] { predict_stream(*model, cycling(examples, 3), out.sink(), options); },
              ThrowsMessage<Error>(HasSubstr("batch_size must be at least 1, got 0")));
  options.batch_size = 4;
  options.batches_ahead = -1;
  EXPECT_THAT([&] { predict_stream(*model, cycling(examples, 3), out.sink(), options); },
              ThrowsMessage<Error>(HasSubstr("batches_ahead must be 0 or more, got -1")));
}

class StreamingEnsembles : public weft::testing::IoTempDir {};

TEST_F(StreamingEnsembles, AnEnsembleStreamsItsAveragedPredictions) {
  std::vector<std::string> paths;
  for (const int seed : {6, 7}) {
    paths.push_back((dir_ / ("calc" + std::to_string(seed) + ".safetensors")).string());
    save_model(paths.back(), *calculator(seed));
  }
  std::unique_ptr<Model> ensemble = load_ensemble(paths, ModelUse::kInfer);
  const std::vector<json> examples = dev_examples(*calculator(6));
  const std::vector<json> expected = ensemble->predict(examples);
  StreamingOptions options;
  options.batch_size = 6;
  options.batches_ahead = 2;  // an ensemble runs whole batches: no weaving ahead
  Collected out;
  predict_stream(*ensemble, cycling(examples, examples.size()), out.sink(), options);
  ASSERT_EQ(out.predictions.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i)
    expect_same_prediction(out.predictions[i].prediction, expected[i], i);
}

}  // namespace
}  // namespace weft::models
