// The inference server behind `weft serve`: registered models loaded from self-contained
// checkpoints, answering JSON over HTTP/1.1 (cpp-httplib), with cross-request dynamic batching:
// the instances of concurrent requests are woven together and run as one loom batch. Each model
// has one batching worker that owns its Model (a weaving thread and a running thread, so weaving
// overlaps execution); HTTP threads only parse. The HTTP library stays out of this header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft::serve {

struct ServedModel {
  std::string name;        // the registered model's name, also the URL's
  std::string checkpoint;  // a self-contained checkpoint of that model
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: an ephemeral port (Server::port() tells which)
  std::vector<ServedModel> models;
  nlohmann::json overrides = nlohmann::json::object();  // runtime options for every model
  double max_wait_ms = 2;        // how long a batch waits for more instances under load
  std::size_t max_batch = 64;    // instances per batch; 1 turns batching off (the baseline)
  std::size_t max_queue = 4096;  // queued instances per model before 503
  std::size_t max_body_bytes = 4u << 20;  // larger bodies get 413
  std::size_t max_instances = 1024;       // per request
  int max_depth = 512;     // JSON nesting of a body, bracket nesting of a text instance
  int http_threads = 300;  // requests answered at once (a request holds a thread once whole)
  // Connections: every deadline is a total, not a per-read timeout.
  double header_timeout_s = 10;        // a request's first byte to the end of its headers, else 408
  double body_timeout_s = 30;          // the end of the headers to the end of the body, else 408
  double idle_timeout_s = 5;           // a keep-alive connection waiting for its next request
  std::size_t max_connections = 8192;  // open at once; more are answered 503
  std::size_t max_requests_per_connection = 10000;  // then the connection is closed
  // :reload reads checkpoints only from the directory each model was loaded from and these.
  std::vector<std::string> allow_reload_from;
  // Non-empty: every request but GET /healthz needs "Authorization: Bearer <token>" (else 401).
  std::string auth_token;
  // Models that decode (models/decoding.h) are served step by step: requests join
  // and leave the running batch between steps. Off: a batch decodes to its end before the next
  // starts (the whole-batch baseline).
  bool iteration_level = true;
  std::size_t max_live_sequences = 256;  // decoding at once (a beam of k counts k); more queue
  int max_beam = 8;                      // the widest "beam" a request may ask for
  std::int32_t max_decode_steps = 0;     // the most "max_steps" a request may ask; 0: the model's
  // After this many seconds with nothing queued, a model's worker hands the tensor pools'
  // cached blocks (and the C heap's free pages) back to the system, so an idle server's RSS
  // falls back after a burst. 0: never.
  double release_memory_idle_s = 10;
};

// What a model's worker has done since the server started.
struct ModelStats {
  std::uint64_t requests = 0;         // predict requests answered (any status)
  std::uint64_t cancelled = 0;        // predict requests whose client went away first
  std::uint64_t batches = 0;          // batches run
  std::uint64_t examples = 0;         // instances predicted (or failed) in batches
  std::uint64_t shared_batches = 0;   // batches holding instances of more than one request
  std::uint64_t reloads = 0;          // successful reloads
  std::uint64_t memory_releases = 0;  // idle spells that handed cached memory back
  double mean_batch_size() const { return batches ? double(examples) / double(batches) : 0.0; }
};

class Server {
 public:
  // Loads every model (throws weft::Error naming a bad checkpoint) and starts their workers.
  explicit Server(ServerOptions options);
  ~Server();  // stops (draining) when still running
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket (throws when it cannot) and returns the port.
  int bind();
  // Serves until stop(); then finishes the requests in flight and stops the workers.
  void serve();
  // Stops accepting connections; safe from any thread (a signal-watching one included).
  void stop();
  int port() const;

  ModelStats stats(const std::string& model) const;
  std::string metrics_text() const;  // what GET /metrics answers
  // Raw HTTP request bytes (pipelined requests too) answered exactly as a connection's are
  // (framing, limits, routes, handlers), without a socket: the response bytes, empty while the
  // request is incomplete. The fuzz target's entry point.
  std::string answer_raw(std::string_view request) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Whether `host` is a loopback address (127.0.0.0/8, ::1, localhost): others are reachable from
// the network, and serving them without an auth token deserves a warning.
bool is_loopback_host(const std::string& host);

// The deepest nesting of [ and { outside JSON strings, scanning without recursion, stopping as
// soon as it passes `limit` (then returns limit + 1).
int json_nesting_depth(std::string_view text, int limit);
// The deepest nesting of ( [ { in a text form (e.g. an SST tree), the same way.
int bracket_depth(std::string_view text, int limit);

}  // namespace weft::serve
WEFT_API_END
