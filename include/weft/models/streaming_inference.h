// The streaming inference driver (TensorFlow Fold's inference plan): predictions for a stream
// of examples of any length, in bounded memory. Examples are pulled from a source in batches;
// while one batch runs on the calling thread (which owns the model), the next ones are woven on
// worker threads; predictions come out in input order, each with its index and, when asked, a
// key computed from its example. At most batches_ahead + 1 batches are held at any time, so
// memory does not grow with the stream (`weft infer` reads a file of any size this way).
#pragma once

#include <cstdint>
#include <functional>

#include <nlohmann/json.hpp>

#include "weft/core/export.h"
#include "weft/models/model.h"

WEFT_API_BEGIN
namespace weft::models {

struct StreamExample {
  nlohmann::json example;  // as Model::parse_example returns it
  nlohmann::json key;      // given by the source (null: none, or options.key computes it)
};

struct StreamedPrediction {
  std::int64_t index = 0;  // 0-based position in the stream
  nlohmann::json key;      // the example's key (null when neither source nor key function gave one)
  nlohmann::json prediction;
};

struct StreamingOptions {
  std::int64_t batch_size = 64;
  // Batches woven ahead of the running one, each on a worker thread (0: weave on the calling
  // thread). Each weave may itself use the model's weave_threads option.
  // Models that cannot weave apart from running (ensembles, models other than BlockModel)
  // run each batch whole on the calling thread.
  int batches_ahead = 1;
  // Computes a key for examples whose source gave none (TensorFlow Fold's key_fn).
  std::function<nlohmann::json(const nlohmann::json& example, std::int64_t index)> key;
};

struct StreamingStats {
  std::int64_t examples = 0;
  std::int64_t batches = 0;
  // The most examples held at once (read, being woven or running): at most
  // (batches_ahead + 1) * batch_size, whatever the stream's length.
  std::int64_t most_examples_held = 0;
};

// Fills `next` and returns true, or returns false at the end of the stream. Called on the
// calling thread only; may throw (the error reaches the caller once earlier predictions are
// emitted).
using ExampleSource = std::function<bool(StreamExample& next)>;
// Receives each prediction, in input order, on the calling thread.
using PredictionSink = std::function<void(StreamedPrediction& prediction)>;

// Runs `model` (inference mode) over every example of `source`. An error in weaving or
// running a batch is rethrown after the predictions of the batches before it were emitted.
StreamingStats predict_stream(Model& model, const ExampleSource& source, const PredictionSink& sink,
                              const StreamingOptions& options = {});

}  // namespace weft::models
WEFT_API_END
