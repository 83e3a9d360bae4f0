// predict_stream: read a batch, weave it on a worker thread while earlier batches run, run the
// oldest on the calling thread and emit its predictions in order; at most batches_ahead batches
// wait read (woven or weaving) behind the running one. The source is read on the calling thread
// between runs, or, with source_thread, on a thread of its own that also weaves.
#include "weft/models/streaming_inference.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "weft/core/claimable_task.h"
#include "weft/core/error.h"
#include "weft/core/job_threads.h"

namespace weft::models {
namespace {

using nlohmann::json;

struct Chunk {
  std::int64_t first_index = 0;
  std::vector<json> examples;
  std::vector<json> keys;
};

// One batch's weave, done by a weaving thread or, when the running thread needs the batch
// before any weaving thread took it, by the running thread itself (a lone batch then pays no
// hand-off between threads).
using WeaveJob = ClaimableTask<blocks::WovenBatch>;

std::shared_ptr<WeaveJob> weave_job(const Model& model, std::shared_ptr<const Chunk> chunk) {
  return std::make_shared<WeaveJob>(
      [&model, chunk = std::move(chunk)] { return model.weave_examples(chunk->examples); });
}

struct PendingBatch {
  std::shared_ptr<const Chunk> chunk;
  std::shared_ptr<WeaveJob> weave;  // set when woven apart from running
};

// One call of predict_stream: reading chunks, predicting and emitting them; the two drivers
// below order these steps.
class Stream {
 public:
  Stream(Model& model, const ExampleSource& source, const PredictionSink& sink,
         const StreamingOptions& options)
      : model_(model),
        weaves_apart_(model.weaves_apart()),
        source_(source),
        sink_(sink),
        options_(options) {}

  StreamingStats on_calling_thread();
  StreamingStats with_source_thread();

 private:
  // Reads examples into `chunk` until it holds batch_size or the source ends the batch (true)
  // or the stream (false). Counts them even when the source throws.
  bool read_chunk(Chunk& chunk);
  // Predicts the batch and emits its predictions in order.
  void run(PendingBatch& batch);
  std::vector<json> predict(PendingBatch& batch, std::vector<std::string>& errors);

  Model& model_;
  const bool weaves_apart_;  // the model's two-step predict (Model::weaves_apart)
  const ExampleSource& source_;
  const PredictionSink& sink_;
  const StreamingOptions& options_;
  StreamingStats stats_;
};

bool Stream::read_chunk(Chunk& chunk) {
  chunk.first_index = stats_.examples;
  struct Count {  // counts what was read, also when the source throws
    StreamingStats& stats;
    const Chunk& chunk;
    ~Count() { stats.examples += std::int64_t(chunk.examples.size()); }
  } count{stats_, chunk};
  while (std::int64_t(chunk.examples.size()) < options_.batch_size) {
    StreamExample next;
    if (!source_(next)) return false;
    const std::int64_t index = chunk.first_index + std::int64_t(chunk.examples.size());
    if (next.key.is_null() && options_.key) next.key = options_.key(next.example, index);
    chunk.examples.push_back(std::move(next.example));
    chunk.keys.push_back(std::move(next.key));
    if (next.ends_batch) break;
  }
  return true;
}

// The batch's predictions, or, isolating failures, its examples run one by one.
std::vector<json> Stream::predict(PendingBatch& batch, std::vector<std::string>& errors) {
  const Chunk& chunk = *batch.chunk;
  std::vector<json> predictions;
  try {
    if (batch.weave)
      predictions = model_.predict_woven(batch.weave->take());  // rethrows a weave error
    else
      predictions = model_.predict(chunk.examples);  // weaves and runs in one call
    if (predictions.size() != chunk.examples.size())
      fail("predict_stream", model_.name(), " returned ", predictions.size(),
           " predictions for a batch of ", chunk.examples.size(), " examples");
    return predictions;
  } catch (const std::exception& e) {
    if (!options_.isolate_failures)
      fail("predict_stream", model_.name(), ": the batch of examples ", chunk.first_index + 1, "-",
           chunk.first_index + std::int64_t(chunk.examples.size()),
           " (counted from 1) failed: ", e.what());
  }
  predictions.assign(chunk.examples.size(), json());
  errors.assign(chunk.examples.size(), std::string());
  for (std::size_t i = 0; i < chunk.examples.size(); ++i) {
    try {
      std::vector<json> one = model_.predict(std::span(&chunk.examples[i], 1));
      if (one.size() != 1)
        fail("predict_stream", model_.name(), " returned ", one.size(),
             " predictions for one example");
      predictions[i] = std::move(one[0]);
    } catch (const std::exception& e) {
      errors[i] = e.what();
    }
  }
  return predictions;
}

void Stream::run(PendingBatch& batch) {
  const Chunk& chunk = *batch.chunk;
  std::vector<std::string> errors;  // filled only when the batch failed and was isolated
  std::vector<json> predictions = predict(batch, errors);
  ++stats_.batches;
  if (options_.on_batch) options_.on_batch(chunk.first_index, std::int64_t(chunk.examples.size()));
  for (std::size_t i = 0; i < predictions.size(); ++i) {
    StreamedPrediction out;
    out.index = chunk.first_index + std::int64_t(i);
    out.key = chunk.keys[i];
    out.prediction = std::move(predictions[i]);
    if (!errors.empty()) out.error = std::move(errors[i]);
    sink_(out);
  }
}

// Read a chunk, hand it to a weaving thread, run the oldest once batches_ahead wait behind it.
StreamingStats Stream::on_calling_thread() {
  const int ahead = weaves_apart_ ? options_.batches_ahead : 0;
  std::deque<PendingBatch> pending;  // declared before the weavers, so destroyed after them
  std::optional<JobThreads> weavers;
  if (ahead > 0) weavers.emplace(ahead);
  std::int64_t held = 0;
  const auto run_oldest = [&] {
    PendingBatch batch = std::move(pending.front());
    pending.pop_front();
    held -= std::int64_t(batch.chunk->examples.size());
    run(batch);
  };
  // An error from the source comes after the predictions of every example read before it.
  std::exception_ptr source_error;
  for (;;) {
    auto chunk = std::make_shared<Chunk>();
    bool more = false;
    try {
      more = read_chunk(*chunk);
    } catch (...) {
      source_error = std::current_exception();
    }
    if (!chunk->examples.empty()) {
      held += std::int64_t(chunk->examples.size());
      stats_.most_examples_held = std::max(stats_.most_examples_held, held);
      PendingBatch batch{chunk, nullptr};
      if (weavers && !source_error) {
        batch.weave = weave_job(model_, chunk);
        weavers->submit([job = batch.weave] { job->run_if_unclaimed(); });
      }
      pending.push_back(std::move(batch));
    }
    if (source_error || !more) break;
    if (std::int64_t(pending.size()) > ahead) run_oldest();
  }
  while (!pending.empty()) run_oldest();
  if (source_error) std::rethrow_exception(source_error);
  return stats_;
}

// A reading thread reads a chunk (waiting for examples as long as the source waits), weaves it
// and queues it while the calling thread runs the queued ones in order; it reads the next
// chunk only while at most batches_ahead batches are held, counting the running one.
StreamingStats Stream::with_source_thread() {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<PendingBatch> ready;
  std::int64_t batches_held = 0;  // ready ones and the running one
  std::int64_t held = 0;
  bool reader_done = false;
  bool stop_reading = false;
  std::exception_ptr source_error;

  std::thread reader([&] {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [&] { return stop_reading || batches_held <= options_.batches_ahead; });
        if (stop_reading) break;
      }
      auto chunk = std::make_shared<Chunk>();
      bool more = false;
      std::exception_ptr error;
      try {
        more = read_chunk(*chunk);
      } catch (...) {
        error = std::current_exception();
      }
      PendingBatch batch{chunk, nullptr};
      if (weaves_apart_ && !chunk->examples.empty() && !error) {
        batch.weave = weave_job(model_, chunk);
        batch.weave->run_if_unclaimed();
      }
      std::lock_guard<std::mutex> lock(mutex);
      if (!chunk->examples.empty()) {
        held += std::int64_t(chunk->examples.size());
        stats_.most_examples_held = std::max(stats_.most_examples_held, held);
        ++batches_held;
        ready.push_back(std::move(batch));
        changed.notify_all();
      }
      if (error) source_error = error;
      if (error || !more) break;
    }
    std::lock_guard<std::mutex> lock(mutex);
    reader_done = true;
    changed.notify_all();
  });
  const auto stop_reader = [&](bool interrupt) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop_reading = true;
      interrupt = interrupt && !reader_done;
    }
    changed.notify_all();
    if (interrupt && options_.interrupt_source) options_.interrupt_source();
    reader.join();  // after the source's current call returns
  };

  try {
    for (;;) {
      PendingBatch batch;
      {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [&] { return !ready.empty() || reader_done; });
        if (ready.empty()) break;
        batch = std::move(ready.front());
        ready.pop_front();
      }
      run(batch);
      std::lock_guard<std::mutex> lock(mutex);
      held -= std::int64_t(batch.chunk->examples.size());
      --batches_held;
      changed.notify_all();
    }
  } catch (...) {
    stop_reader(/*interrupt=*/true);
    throw;
  }
  stop_reader(/*interrupt=*/false);
  if (source_error) std::rethrow_exception(source_error);
  return stats_;
}

}  // namespace

StreamingStats predict_stream(Model& model, const ExampleSource& source, const PredictionSink& sink,
                              const StreamingOptions& options) {
  if (options.batch_size < 1)
    fail("predict_stream", "batch_size must be at least 1, got ", options.batch_size);
  if (options.batches_ahead < 0)
    fail("predict_stream", "batches_ahead must be 0 or more, got ", options.batches_ahead);
  if (!source || !sink) fail("predict_stream", "needs an example source and a prediction sink");
  Stream stream(model, source, sink, options);
  return options.source_thread ? stream.with_source_thread() : stream.on_calling_thread();
}

}  // namespace weft::models
