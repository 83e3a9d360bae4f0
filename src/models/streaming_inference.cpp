// predict_stream: read a batch, weave it on a worker thread while earlier batches run, run the
// oldest on the calling thread and emit its predictions in order; at most batches_ahead batches
// wait woven (or weaving) behind the running one.
#include "weft/models/streaming_inference.h"

#include <algorithm>
#include <deque>
#include <exception>
#include <future>
#include <memory>
#include <vector>

#include "weft/core/error.h"
#include "weft/models/block_model.h"

namespace weft::models {
namespace {

using nlohmann::json;

struct Chunk {
  std::int64_t first_index = 0;
  std::vector<json> examples;
  std::vector<json> keys;
};

struct PendingBatch {
  std::shared_ptr<const Chunk> chunk;
  std::future<blocks::WovenBatch> woven;  // valid when woven ahead on a worker thread
};

}  // namespace

StreamingStats predict_stream(Model& model, const ExampleSource& source, const PredictionSink& sink,
                              const StreamingOptions& options) {
  if (options.batch_size < 1)
    fail("predict_stream", "batch_size must be at least 1, got ", options.batch_size);
  if (options.batches_ahead < 0)
    fail("predict_stream", "batches_ahead must be 0 or more, got ", options.batches_ahead);
  if (!source || !sink) fail("predict_stream", "needs an example source and a prediction sink");
  // Weaving apart from running needs the two-step predict of a single BlockModel.
  auto* block = dynamic_cast<BlockModel*>(&model);
  const bool weaves_apart = block != nullptr && block->ensemble_size() == 1;
  const int ahead = weaves_apart ? options.batches_ahead : 0;

  StreamingStats stats;
  std::deque<PendingBatch> pending;
  std::int64_t held = 0;

  const auto read_chunk = [&](Chunk& chunk) {
    chunk.first_index = stats.examples;
    StreamExample next;
    while (std::int64_t(chunk.examples.size()) < options.batch_size) {
      next.example = json();
      next.key = json();
      if (!source(next)) break;
      const std::int64_t index = chunk.first_index + std::int64_t(chunk.examples.size());
      if (next.key.is_null() && options.key) next.key = options.key(next.example, index);
      chunk.examples.push_back(std::move(next.example));
      chunk.keys.push_back(std::move(next.key));
    }
    stats.examples += std::int64_t(chunk.examples.size());
    return !chunk.examples.empty();
  };

  const auto run_oldest = [&] {
    PendingBatch batch = std::move(pending.front());
    pending.pop_front();
    const Chunk& chunk = *batch.chunk;
    std::vector<json> predictions;
    try {
      if (batch.woven.valid())
        predictions = block->predict_woven(batch.woven.get());  // get() rethrows a weave error
      else
        predictions = model.predict(chunk.examples);  // weaves and runs in one call
    } catch (const std::exception& e) {
      fail("predict_stream", model.name(), ": the batch of examples ", chunk.first_index + 1, "-",
           chunk.first_index + std::int64_t(chunk.examples.size()),
           " (counted from 1) failed: ", e.what());
    }
    if (predictions.size() != chunk.examples.size())
      fail("predict_stream", model.name(), " returned ", predictions.size(),
           " predictions for a batch of ", chunk.examples.size(), " examples");
    ++stats.batches;
    held -= std::int64_t(chunk.examples.size());
    for (std::size_t i = 0; i < predictions.size(); ++i) {
      StreamedPrediction out;
      out.index = chunk.first_index + std::int64_t(i);
      out.key = chunk.keys[i];
      out.prediction = std::move(predictions[i]);
      sink(out);
    }
  };

  // An error from the source comes after the predictions of every example read before it.
  std::exception_ptr source_error;
  for (;;) {
    auto chunk = std::make_shared<Chunk>();
    try {
      if (!read_chunk(*chunk)) break;
    } catch (...) {
      source_error = std::current_exception();
      if (!chunk->examples.empty()) {
        stats.examples += std::int64_t(chunk->examples.size());
        pending.push_back({std::move(chunk), {}});
        held += std::int64_t(pending.back().chunk->examples.size());
      }
      break;
    }
    held += std::int64_t(chunk->examples.size());
    stats.most_examples_held = std::max(stats.most_examples_held, held);
    PendingBatch batch{chunk, {}};
    if (ahead > 0)
      batch.woven = std::async(std::launch::async,
                               [block, chunk] { return block->weave_examples(chunk->examples); });
    pending.push_back(std::move(batch));
    if (std::int64_t(pending.size()) > ahead) run_oldest();
  }
  stats.most_examples_held = std::max(stats.most_examples_held, held);
  while (!pending.empty()) run_oldest();
  if (source_error) std::rethrow_exception(source_error);
  return stats;
}

}  // namespace weft::models
