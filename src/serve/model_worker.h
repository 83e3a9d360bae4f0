// One served model's batching worker (private to the server): a bounded queue of parsed
// instances from any number of requests, and a running thread that serves it through the
// streaming inference driver (models::predict_stream), the only thread that runs the Model.
// The queue is the driver's example source, read and woven on the driver's source thread while
// the batch before runs: a batch holds at most max_batch instances and ends when the queue runs
// dry (under load it first waits up to max_wait_ms for more).
// Failures are isolated per instance. A reload swaps the Model under the queue's lock;
// instances keep the Model that parsed them, and a stream (so a batch) never mixes two.
// A model that decodes (models/decoding.h) is served by a decoding loop instead
// (decoding_loop.h), step by step, from the same queue.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/models/decoding.h"
#include "weft/models/model.h"
#include "weft/models/streaming_inference.h"
#include "weft/serve/server.h"

namespace weft::serve::detail {

// One predict request's instances and their answers; the HTTP thread waits on it.
struct PendingRequest {
  explicit PendingRequest(std::size_t n) : results(n), errors(n), remaining(n) {}
  void finish(std::size_t index, nlohmann::json result, std::string error);
  void wait();

  std::mutex mutex;
  std::condition_variable done;
  std::vector<nlohmann::json> results;
  std::vector<std::string> errors;  // empty: a prediction
  std::size_t remaining;
  // The client's connection while it waits, for a decoding loop to notice it go away
  // (client_watch.h): whether an interim 1xx answer may be written to it (HTTP/1.1), whether
  // one was (the decoding thread's), and whether the client went away (then the answer goes
  // nowhere, and the request is counted apart).
  int client_fd = -1;
  bool interim_allowed = false;
  bool asked = false;
  std::atomic<bool> abandoned{false};
};

struct QueuedInstance {
  std::shared_ptr<PendingRequest> request;
  std::size_t index = 0;
  nlohmann::json example;
  std::shared_ptr<models::Model> model;  // the one that parsed it
  models::DecodeSettings decode{};       // for a decoding model
  std::chrono::steady_clock::time_point queued_at{};
};

// Prometheus-style buckets.
struct Histogram {
  explicit Histogram(std::vector<double> upper_bounds)
      : bounds(std::move(upper_bounds)), counts(bounds.size() + 1) {}
  void add(double value);
  std::vector<double> bounds;
  std::vector<std::uint64_t> counts;  // per bucket, not cumulative; the last is +Inf
  double sum = 0;
  std::uint64_t count = 0;
};

// A decoding loop's figures (under the worker's lock).
struct DecodeStats {
  std::uint64_t steps = 0, tokens = 0, cancelled = 0, sequences = 0;
  std::uint64_t dropped = 0;  // queued instances of clients gone, dropped before encoding
  std::size_t live = 0, generations = 0, tape_nodes = 0;  // now
  double cpu_seconds = 0;  // the decoding thread's CPU time (what a token costs, under any load)
  Histogram first_step{{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5}};
  Histogram step_seconds{{0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05}};
  double steps_per_second = 0, tokens_per_second = 0;  // over the last 10 seconds (snapshot)
  // Steps and tokens per tenth of a second over the last 10 seconds (at most 100 entries
  // however fast the steps: a snapshot copies them).
  struct Tick {
    std::chrono::steady_clock::time_point start;
    std::uint64_t steps = 0, tokens = 0;
  };
  std::deque<Tick> recent;
  void count_step(std::chrono::steady_clock::time_point now, std::uint64_t step_tokens);
};

class DecodingLoop;

class ModelWorker {
 public:
  ModelWorker(std::string name, std::string checkpoint, const ServerOptions& options);
  ~ModelWorker();

  const std::string& name() const { return name_; }
  std::shared_ptr<models::Model> model() const;
  std::string checkpoint() const;
  // Queues a request's parsed instances; false (nothing queued) when the queue would overflow.
  bool submit(std::vector<QueuedInstance> instances);
  // Loads a checkpoint and swaps it in; throws (the old model keeps serving) when it fails.
  void reload(const std::string& checkpoint);
  // Finishes every queued instance, then ends the threads.
  void stop();
  // Whether the model decodes (Model::decoding(): served by the decoding loop).
  bool decodes() const { return decodes_; }

  // For the decoding loop: queued instances from the front, of the front's model, whose beams
  // fit in `max_sequences` (with `wait`, waits for one unless stopping); empty when none.
  std::vector<QueuedInstance> take_queued(std::size_t max_sequences, bool wait);
  std::size_t queue_depth() const;  // instances queued now
  bool stopping() const;
  // Updates the decoding figures under the lock.
  template <typename Update>
  void update_decode_stats(Update update) {
    std::lock_guard<std::mutex> lock(mutex_);
    update(decode_stats_);
  }

  struct Snapshot {
    ModelStats stats;
    std::vector<std::pair<int, std::uint64_t>> statuses;  // (code, requests)
    Histogram latency{{}};
    Histogram batch_sizes{{}};
    std::size_t queue_depth = 0;
    double examples_per_second = 0;  // over the last 10 seconds
    std::uint64_t reload_failures = 0;
    bool decodes = false;
    DecodeStats decode;
  };
  void record_request(int status, double seconds);
  void record_cancelled();  // a request whose client went away before its answer
  ModelStats stats() const;
  Snapshot snapshot() const;

 private:
  // An instance handed to the driver, waiting for its prediction.
  struct InFlight {
    std::shared_ptr<PendingRequest> request;
    std::size_t index = 0;
  };
  // Streams the queue through predict_stream, one stream per Model the instances were parsed
  // with, until stop() and the queue is drained.
  void run_loop();
  // The driver's example source over the queue (on its source thread), for `model`'s stream.
  bool next_instance(models::StreamExample& next, const models::Model* model,
                     std::size_t& in_batch);
  // Counts a batch that ran (its instances are the first `size` in flight).
  void count_batch(std::size_t size);
  // Waits on queue_changed_ (`lock` held) until `ready()`; a wait that lasts
  // release_memory_idle_s first hands the pools' cached memory back (once per idle spell).
  template <typename Ready>
  void wait_for_work(std::unique_lock<std::mutex>& lock, Ready ready);

  const std::string name_;
  const ServerOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable queue_changed_;
  std::deque<QueuedInstance> queue_;
  std::shared_ptr<models::Model> model_;
  std::string checkpoint_;
  bool stopping_ = false;
  bool source_interrupted_ = false;  // the running stream failed: its source must stop waiting
  std::size_t last_batch_requests_ = 0;
  std::deque<InFlight> in_flight_;  // handed to the driver, in order, awaiting predictions
  std::mutex reload_mutex_;
  bool decodes_ = false;
  DecodeStats decode_stats_;
  std::unique_ptr<DecodingLoop> decoding_;

  // Metrics (under mutex_).
  ModelStats stats_;
  std::array<std::uint64_t, 600> status_counts_{};
  Histogram latency_{{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5}};
  Histogram batch_sizes_{{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}};
  std::uint64_t reload_failures_ = 0;
  std::deque<std::pair<std::chrono::steady_clock::time_point, std::size_t>> recent_;  // rate

  std::thread runner_;
};

}  // namespace weft::serve::detail
