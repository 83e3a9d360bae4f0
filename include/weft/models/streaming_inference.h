// The streaming inference driver (TensorFlow Fold's inference plan): predictions for a stream
// of examples of any length, in bounded memory. Examples are pulled from a source in batches;
// while one batch runs on the calling thread (which owns the model), the next ones are woven on
// worker threads; predictions come out in input order, each with its index and, when asked, a
// key computed from its example. At most batches_ahead + 1 batches are held at any time, so
// memory does not grow with the stream (`weft infer` reads a file of any size this way).
// A source that is fed as it goes (the server's queue of requests) is read on a thread of its
// own and decides where batches end, so it may wait for examples while batches run; with
// isolate_failures, an example that fails gets its own error and the stream goes on (the
// server: a bad request never fails the requests batched with it).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "weft/core/export.h"
#include "weft/models/model.h"

WEFT_API_BEGIN
namespace weft::models {

struct StreamExample {
  nlohmann::json example;  // as Model::parse_example returns it
  nlohmann::json key;      // given by the source (null: none, or options.key computes it)
  // Set by the source: the batch ends after this example, short of batch_size (a server ends
  // a batch when its queue runs dry rather than wait for more requests).
  bool ends_batch = false;
};

struct StreamedPrediction {
  std::int64_t index = 0;  // 0-based position in the stream
  nlohmann::json key;      // the example's key (null when neither source nor key function gave one)
  nlohmann::json prediction;  // null when `error` is set
  std::string error;          // why this example failed (only with isolate_failures)
};

struct StreamingOptions {
  std::int64_t batch_size = 64;
  // Batches woven ahead of the running one, each on a worker thread (0: weave on the calling
  // thread). Each weave may itself use the model's weave_threads option.
  // Models that cannot weave apart from running (Model::weaves_apart false: ensembles, models
  // other than block models) run each batch whole on the calling thread.
  int batches_ahead = 1;
  // Off: the source is called on the calling thread, between runs, so it should not wait for
  // examples (a file). On: a thread of its own calls the source, one call at a time, and weaves
  // what it read (one weaving thread); it may wait for examples for as long as it likes, while
  // the batches read before run (a server's queue). Either way at most batches_ahead + 1
  // batches are held. An error in a batch or the sink waits for the source's current call to
  // return before it reaches the caller.
  bool source_thread = false;
  // With source_thread: called on the calling thread when the stream ends early by an error (a
  // batch's, the sink's) while the source thread may be inside a call that waits for examples
  // (a server's queue). It must make that call return soon (false, or an example, which is then
  // dropped): the error reaches the caller only after the call returned. Unset, the error waits
  // until the source returns by itself.
  std::function<void()> interrupt_source;
  // Computes a key for examples whose source gave none (TensorFlow Fold's key_fn), on the
  // thread that calls the source.
  std::function<nlohmann::json(const nlohmann::json& example, std::int64_t index)> key;
  // Off: the first batch that fails to weave or run ends the stream with its error. On: that
  // batch runs again one example at a time, each example that fails alone is emitted with its
  // error (and a null prediction), and the stream goes on.
  bool isolate_failures = false;
  // Called on the calling thread after each batch ran, before its predictions reach the sink:
  // the index of its first example and how many it holds.
  std::function<void(std::int64_t first_index, std::int64_t size)> on_batch;
};

struct StreamingStats {
  std::int64_t examples = 0;
  std::int64_t batches = 0;
  // The most examples held at once (read, being woven or running): at most
  // (batches_ahead + 1) * batch_size, whatever the stream's length.
  std::int64_t most_examples_held = 0;
};

// Fills `next` and returns true, or returns false at the end of the stream. `next` comes with
// example and key null and ends_batch false. Called on the calling thread, or on the source
// thread (options.source_thread), one call at a time; may throw (the error reaches the caller
// once earlier predictions are emitted).
using ExampleSource = std::function<bool(StreamExample& next)>;
// Receives each prediction, in input order, on the calling thread.
using PredictionSink = std::function<void(StreamedPrediction& prediction)>;

// Runs `model` (inference mode) over every example of `source`. An error in weaving or
// running a batch (without isolate_failures), in the source or in the sink is rethrown after
// the predictions of the batches before it were emitted.
StreamingStats predict_stream(Model& model, const ExampleSource& source, const PredictionSink& sink,
                              const StreamingOptions& options = {});

}  // namespace weft::models
WEFT_API_END
