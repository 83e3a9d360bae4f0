// The streaming inference driver (models/streaming_inference.h): predictions equal one
// predict() over the whole input, in input order, for every batch size and number of weave
// threads; keys come from the source or the key function; memory stays within
// (batches_ahead + 1) batches on a long stream; an ensemble streams too; an error in the
// source or in a batch reaches the caller after the predictions before it, and isolated
// failures fail alone, with the source on the calling thread or its own; a source fed as it
// goes, on its own thread, ends batches and never has an example held back while it waits, and
// is woken when the stream fails.
#include <chrono>
#include <condition_variable>
#include <mutex>

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
  for (const bool source_thread : {false, true}) {
    for (const int threads : {0, 1, 3}) {
      for (const std::int64_t batch : {1, 7, 64}) {
        SCOPED_TRACE("source_thread " + std::to_string(source_thread) + ", batches_ahead " +
                     std::to_string(threads) + ", batch " + std::to_string(batch));
        StreamingOptions options;
        options.batch_size = batch;
        options.batches_ahead = threads;
        options.source_thread = source_thread;
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
}

TEST(StreamingInference, WeavingAheadChangesNoBit) {
  // The same batches woven (and scheduled and planned) ahead on other threads or in turn on the
  // running one: the very same predictions, to the last bit.
  std::unique_ptr<Model> model = calculator(3);
  const std::vector<json> examples = dev_examples(*model);
  std::vector<json> in_turn;
  for (const bool source_thread : {false, true}) {
    for (const int ahead : {0, 1, 3}) {
      SCOPED_TRACE("source_thread " + std::to_string(source_thread) + ", batches_ahead " +
                   std::to_string(ahead));
      StreamingOptions options;
      options.batch_size = 6;
      options.batches_ahead = ahead;
      options.source_thread = source_thread;
      Collected out;
      predict_stream(*model, cycling(examples, 3 * examples.size()), out.sink(), options);
      std::vector<json> got;
      for (const StreamedPrediction& p : out.predictions) got.push_back(p.prediction);
      ASSERT_EQ(got.size(), 3 * examples.size());
      if (in_turn.empty()) in_turn = got;
      EXPECT_EQ(got, in_turn);
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
  for (const bool source_thread : {false, true}) {
    SCOPED_TRACE("source_thread " + std::to_string(source_thread));
    StreamingOptions options;
    options.batch_size = 8;
    options.batches_ahead = 2;
    options.source_thread = source_thread;
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
}

TEST(StreamingInference, ErrorsArriveAfterThePredictionsBeforeThem) {
  std::unique_ptr<Model> model = calculator(4);
  const std::vector<json> examples = dev_examples(*model);
  StreamingOptions options;
  options.batch_size = 5;
  // The source fails at its 13th example: the 12 before it are predicted first.
  for (const int mode : {0, 1, 2, 3}) {
    const int threads = mode % 2 == 0 ? 0 : 2;
    options.batches_ahead = threads;
    options.source_thread = mode >= 2;
    std::size_t next = 0;
    const ExampleSource failing = [&](StreamExample& out) {
      if (next == 12) fail("test", "line 13 is unreadable");
      out.example = examples[next++];
      return true;
    };
    Collected out;
    EXPECT_THAT([&] { predict_stream(*model, failing, out.sink(), options); },
                ThrowsMessage<Error>(HasSubstr("line 13 is unreadable")));
    EXPECT_EQ(out.predictions.size(), 12u) << "mode " << mode;
  }
  // An example the model cannot weave, in the second batch: the first batch is predicted.
  std::vector<json> with_bad(examples.begin(), examples.begin() + 12);
  with_bad[7] = json{{"expression", "not an expression"}, {"sign", 1}};
  for (const int mode : {0, 1, 2, 3}) {
    options.batches_ahead = mode % 2 == 0 ? 0 : 2;
    options.source_thread = mode >= 2;
    Collected out;
    EXPECT_THAT(
        [&] { predict_stream(*model, cycling(with_bad, with_bad.size()), out.sink(), options); },
        ThrowsMessage<Error>(HasSubstr("calculator: the batch of examples 6-10 (counted from 1)")));
    EXPECT_EQ(out.predictions.size(), 5u) << "mode " << mode;
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

// A source fed in bursts, as a server's queue is, read on the source thread: it ends each
// burst's batch at the burst's last example, then waits until every example it gave has been
// answered before it gives the next burst (a closed-loop client). A driver that held back an
// example read while its source waits would wait for ever: the source's wait has a deadline
// and fails the test instead.
TEST(StreamingInference, AFedSourceOnItsOwnThreadEndsBatchesAndIsNeverHeldBack) {
  std::unique_ptr<Model> model = calculator(8);
  const std::vector<json> examples = dev_examples(*model);
  const std::vector<json> expected = model->predict(examples);
  const std::vector<std::size_t> bursts = {1, 5, 3, 9, 1, 1, 12, 8};  // sums to 40
  for (const int ahead : {0, 1, 2}) {
    SCOPED_TRACE("batches_ahead " + std::to_string(ahead));
    std::mutex mutex;
    std::condition_variable answered;
    std::size_t burst = 0, in_burst = 0, given = 0;
    bool stalled = false;
    std::vector<std::pair<std::int64_t, std::int64_t>> batches;
    std::vector<StreamedPrediction> predictions;
    const ExampleSource fed = [&](StreamExample& next) {
      std::unique_lock<std::mutex> lock(mutex);
      if (in_burst == bursts[burst]) {
        if (!answered.wait_for(lock, std::chrono::seconds(20),
                               [&] { return predictions.size() == given; })) {
          stalled = true;
          return false;
        }
        ++burst;
        in_burst = 0;
        if (burst == bursts.size()) return false;
      }
      next.example = examples[given++];
      next.ends_batch = ++in_burst == bursts[burst];
      return true;
    };
    const PredictionSink sink = [&](StreamedPrediction& p) {
      std::lock_guard<std::mutex> lock(mutex);
      predictions.push_back(p);
      answered.notify_all();
    };
    StreamingOptions options;
    options.batch_size = 10;  // the burst of 12 becomes 10 + 2
    options.batches_ahead = ahead;
    options.source_thread = true;
    options.on_batch = [&](std::int64_t first, std::int64_t size) {
      std::lock_guard<std::mutex> lock(mutex);
      EXPECT_EQ(std::int64_t(predictions.size()), first) << "on_batch comes before the sink";
      batches.emplace_back(first, size);
    };
    const StreamingStats stats = predict_stream(*model, fed, sink, options);
    EXPECT_FALSE(stalled) << "an example read was held back while the source waited";
    ASSERT_EQ(predictions.size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(predictions[i].index, std::int64_t(i));
      expect_same_prediction(predictions[i].prediction, expected[i], i);
    }
    const std::vector<std::pair<std::int64_t, std::int64_t>> expected_batches = {
        {0, 1}, {1, 5}, {6, 3}, {9, 9}, {18, 1}, {19, 1}, {20, 10}, {30, 2}, {32, 8}};
    EXPECT_EQ(batches, expected_batches);
    EXPECT_EQ(stats.batches, 9);
    EXPECT_EQ(stats.examples, 40);
  }
}

// A failure that is no example's (here the sink's) while the source thread waits for examples
// that will not come (a quiet server's queue): the stream calls interrupt_source, the source
// returns, and the error reaches the caller at once. Without the call the source would wait
// until its deadline, which fails the test.
TEST(StreamingInference, AFailureWakesASourceWaitingForExamples) {
  std::unique_ptr<Model> model = calculator(9);
  const std::vector<json> examples = dev_examples(*model);
  std::mutex mutex;
  std::condition_variable changed;
  bool interrupted = false, timed_out = false;
  std::size_t given = 0;
  const ExampleSource quiet_after_three = [&](StreamExample& next) {
    std::unique_lock<std::mutex> lock(mutex);
    if (given == 3) {
      timed_out = !changed.wait_for(lock, std::chrono::seconds(20), [&] { return interrupted; });
      return false;
    }
    next.example = examples[given++];
    next.ends_batch = given == 3;
    return true;
  };
  const PredictionSink failing_sink = [](StreamedPrediction&) {
    fail("test", "the client went away");
  };
  for (const int ahead : {0, 1}) {
    SCOPED_TRACE("batches_ahead " + std::to_string(ahead));
    given = 0;
    interrupted = timed_out = false;
    StreamingOptions options;
    options.batch_size = 8;
    options.batches_ahead = ahead;
    options.source_thread = true;
    options.interrupt_source = [&] {
      std::lock_guard<std::mutex> lock(mutex);
      interrupted = true;
      changed.notify_all();
    };
    EXPECT_THAT([&] { predict_stream(*model, quiet_after_three, failing_sink, options); },
                ThrowsMessage<Error>(HasSubstr("the client went away")));
    EXPECT_TRUE(interrupted);
    EXPECT_FALSE(timed_out) << "the source waited for its deadline";
  }
}

// With isolate_failures, an example the model cannot weave fails alone, with its error; the
// examples batched with it and every later batch are predicted as if it were not there.
TEST(StreamingInference, IsolatedFailuresFailAloneAndTheStreamGoesOn) {
  std::unique_ptr<Model> model = calculator(10);
  const std::vector<json> examples = dev_examples(*model);
  std::vector<json> with_bad(examples.begin(), examples.begin() + 12);
  with_bad[7] = json{{"expression", "not an expression"}, {"sign", 1}};
  with_bad[11] = json{{"sign", 1}};
  for (const int mode : {0, 1, 2, 3}) {
    SCOPED_TRACE("mode " + std::to_string(mode));
    StreamingOptions options;
    options.batch_size = 5;
    options.batches_ahead = mode % 2 == 0 ? 0 : 2;
    options.source_thread = mode >= 2;
    options.isolate_failures = true;
    Collected out;
    const StreamingStats stats =
        predict_stream(*model, cycling(with_bad, with_bad.size()), out.sink(), options);
    EXPECT_EQ(stats.batches, 3);
    ASSERT_EQ(out.predictions.size(), with_bad.size());
    for (std::size_t i = 0; i < with_bad.size(); ++i) {
      if (i == 7 || i == 11) {
        EXPECT_FALSE(out.predictions[i].error.empty()) << "example " << i;
        EXPECT_TRUE(out.predictions[i].prediction.is_null()) << "example " << i;
        const std::string one_alone = [&] {
          try {
            model->predict(std::span(&with_bad[i], 1));
          } catch (const std::exception& e) {
            return std::string(e.what());
          }
          return std::string("no error");
        }();
        EXPECT_EQ(out.predictions[i].error, one_alone) << "example " << i;
      } else {
        EXPECT_TRUE(out.predictions[i].error.empty()) << out.predictions[i].error;
        expect_same_prediction(out.predictions[i].prediction,
                               model->predict(std::span(&with_bad[i], 1))[0], i);
      }
    }
  }
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
