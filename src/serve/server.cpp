// The HTTP side of the server (cpp-httplib): routes, input limits, parsing each instance on its
// own, handing instances to the model's worker, answers and the Prometheus metrics text.
#include "weft/serve/server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <map>

#include <fmt/format.h>

#include "model_worker.h"
#include "weft/core/error.h"
#include "weft/models/registry.h"

namespace weft::serve {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

template <typename Open, typename Close>
int scan_depth(std::string_view text, int limit, bool json_strings, Open open, Close close) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (json_strings && c == '"') {
      in_string = true;
    } else if (open(c)) {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return limit + 1;
    } else if (close(c)) {
      --depth;
    }
  }
  return deepest;
}

void set_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump() + "\n", "application/json");
}

void set_error(httplib::Response& res, int status, const std::string& message) {
  set_json(res, status, json{{"error", message}});
}

std::string status_text(int status) {
  switch (status) {
    case 400:
      return "bad request";
    case 404:
      return "not found";
    case 405:
      return "method not allowed";
    case 413:
      return "request body too large";
    case 503:
      return "service unavailable";
    default:
      return "error";
  }
}

// Debian's cpp-httplib listens with a backlog of 5 (compiled into the library), so a burst of
// clients connecting at once overflows it and some connections are reset; Linux lets a second
// listen() on the bound socket raise the backlog.
class HttpServer : public httplib::Server {
 public:
  void widen_backlog(int backlog) { ::listen(svr_sock_.load(), backlog); }
};

}  // namespace

int json_nesting_depth(std::string_view text, int limit) {
  return scan_depth(
      text, limit, true, [](char c) { return c == '[' || c == '{'; },
      [](char c) { return c == ']' || c == '}'; });
}

int bracket_depth(std::string_view text, int limit) {
  return scan_depth(
      text, limit, false, [](char c) { return c == '(' || c == '[' || c == '{'; },
      [](char c) { return c == ')' || c == ']' || c == '}'; });
}

struct Server::Impl {
  explicit Impl(ServerOptions o) : options(std::move(o)) {
    if (options.models.empty()) fail("weft serve", "no model to serve");
    for (const ServedModel& m : options.models) {
      if (workers.count(m.name)) fail("weft serve", "model '", m.name, "' is given twice");
      models::find_model(m.name);  // throws naming the registered models
      workers.emplace(m.name, std::make_unique<detail::ModelWorker>(m.name, m.checkpoint, options));
    }
    setup_routes();
  }

  void setup_routes();
  void predict(const std::string& name, const httplib::Request& req, httplib::Response& res);
  void reload(const std::string& name, const httplib::Request& req, httplib::Response& res);
  detail::ModelWorker* find(const std::string& name, httplib::Response& res);
  std::string metrics() const;

  ServerOptions options;
  std::map<std::string, std::unique_ptr<detail::ModelWorker>> workers;
  HttpServer http;
  std::atomic<int> port{-1};
  std::atomic<bool> stopped{false};
  std::atomic<std::uint64_t> other_requests{0};
};

detail::ModelWorker* Server::Impl::find(const std::string& name, httplib::Response& res) {
  const auto it = workers.find(name);
  if (it != workers.end()) return it->second.get();
  std::string known;
  for (const auto& [n, w] : workers) known += (known.empty() ? "" : ", ") + n;
  set_error(res, 404, fmt::format("unknown model '{}'; this server has: {}", name, known));
  return nullptr;
}

void Server::Impl::predict(const std::string& name, const httplib::Request& req,
                           httplib::Response& res) {
  const auto start = Clock::now();
  detail::ModelWorker* worker = find(name, res);
  if (worker == nullptr) return;
  auto finish = [&] {
    if (res.status == 503) res.set_header("Retry-After", "1");
    worker->record_request(res.status, std::chrono::duration<double>(Clock::now() - start).count());
  };
  if (json_nesting_depth(req.body, options.max_depth) > options.max_depth) {
    set_error(res, 400, fmt::format("the body nests deeper than {} levels", options.max_depth));
    return finish();
  }
  json body;
  try {
    body = json::parse(req.body);
  } catch (const json::exception& e) {
    set_error(res, 400, fmt::format("malformed JSON: {}", e.what()));
    return finish();
  }
  if (!body.is_object() || !body.contains("instances") || !body["instances"].is_array()) {
    set_error(res, 400, R"(the body must be a JSON object {"instances": [...]})");
    return finish();
  }
  const json& instances = body["instances"];
  if (instances.empty()) {
    set_error(res, 400, "\"instances\" is empty");
    return finish();
  }
  if (instances.size() > options.max_instances) {
    set_error(res, 400,
              fmt::format("{} instances; at most {} per request", instances.size(),
                          options.max_instances));
    return finish();
  }
  // Each instance is parsed on its own, so a bad one fails alone.
  const std::shared_ptr<models::Model> model = worker->model();
  auto pending = std::make_shared<detail::PendingRequest>(instances.size());
  std::vector<detail::QueuedInstance> queued;
  std::vector<std::string> parse_errors(instances.size());
  for (std::size_t i = 0; i < instances.size(); ++i) {
    const std::string line =
        instances[i].is_string() ? instances[i].get<std::string>() : instances[i].dump();
    try {
      if (instances[i].is_string() && bracket_depth(line, options.max_depth) > options.max_depth) {
        fail("", "the text nests deeper than ", options.max_depth, " levels");
      }
      queued.push_back(
          {pending, i, model->parse_example(line, fmt::format("instance {}", i)), model});
    } catch (const std::exception& e) {
      parse_errors[i] = e.what();
    }
  }
  for (std::size_t i = 0; i < instances.size(); ++i) {
    if (!parse_errors[i].empty()) pending->finish(i, json(), parse_errors[i]);
  }
  if (!queued.empty()) {
    if (!worker->submit(std::move(queued))) {
      set_error(res, 503, fmt::format("model '{}' is overloaded (queue full); retry later", name));
      return finish();
    }
  }
  pending->wait();
  json predictions = json::array();
  json errors = json::array();
  for (std::size_t i = 0; i < instances.size(); ++i) {
    if (pending->errors[i].empty()) {
      predictions.push_back(std::move(pending->results[i]));
    } else {
      const std::string message = fmt::format("instance {}: {}", i, pending->errors[i]);
      predictions.push_back(json{{"error", message}});
      errors.push_back(json{{"index", i}, {"error", message}});
    }
  }
  if (errors.empty()) {
    set_json(res, 200, json{{"predictions", std::move(predictions)}});
  } else {
    // 400 when any instance failed, naming each; the others' predictions are still there.
    const std::string first = errors[0]["error"].get<std::string>();
    set_json(
        res, 400,
        json{{"error", errors.size() == 1 ? first
                                          : fmt::format("{} of {} instances failed; {}",
                                                        errors.size(), instances.size(), first)},
             {"errors", std::move(errors)},
             {"predictions", std::move(predictions)}});
  }
  finish();
}

void Server::Impl::reload(const std::string& name, const httplib::Request& req,
                          httplib::Response& res) {
  detail::ModelWorker* worker = find(name, res);
  if (worker == nullptr) return;
  std::string checkpoint = worker->checkpoint();
  if (!req.body.empty()) {
    if (json_nesting_depth(req.body, 8) > 8) return set_error(res, 400, "malformed reload body");
    try {
      const json body = json::parse(req.body);
      if (!body.is_object()) throw json::other_error::create(0, "not an object", nullptr);
      if (body.contains("checkpoint")) checkpoint = body.at("checkpoint").get<std::string>();
    } catch (const json::exception& e) {
      return set_error(res, 400,
                       fmt::format(R"(the body must be {{"checkpoint": "path"}}: {})", e.what()));
    }
  }
  try {
    worker->reload(checkpoint);
  } catch (const std::exception& e) {
    return set_error(res, 400,
                     fmt::format("reload failed, the old checkpoint keeps serving: {}", e.what()));
  }
  set_json(res, 200, json{{"model", name}, {"checkpoint", checkpoint}, {"reloaded", true}});
}

void Server::Impl::setup_routes() {
  http.new_task_queue = [n = options.http_threads] {
    return new httplib::ThreadPool(std::size_t(std::max(1, n)));
  };
  http.set_payload_max_length(options.max_body_bytes);
  http.set_keep_alive_max_count(1u << 30);
  http.set_tcp_nodelay(true);
  http.Post(R"(/v1/models/([^/:]+):predict)",
            [this](const httplib::Request& req, httplib::Response& res) {
              predict(req.matches[1], req, res);
            });
  http.Post(R"(/v1/models/([^/:]+):reload)",
            [this](const httplib::Request& req, httplib::Response& res) {
              reload(req.matches[1], req, res);
            });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json list = json::array();
    for (const auto& [name, worker] : workers) {
      json entry = models::find_model(name).to_json();
      entry["checkpoint"] = worker->checkpoint();
      entry["options_in_use"] = worker->model()->options().values();
      list.push_back(std::move(entry));
    }
    set_json(res, 200, json{{"models", std::move(list)}});
  });
  http.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    if (stopped) return set_json(res, 503, json{{"status", "draining"}});
    set_json(res, 200, json{{"status", "ok"}});
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics(), "text/plain; version=0.0.4");
  });
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
        std::string what = "internal error";
        try {
          if (error) std::rethrow_exception(error);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        set_error(res, 500, what);
      });
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    ++other_requests;
    if (!res.body.empty()) return;
    if (res.status == 404) {
      return set_error(res, 404, fmt::format("no such endpoint: {} {}", req.method, req.path));
    }
    if (res.status == 413) {
      return set_error(res, 413,
                       fmt::format("the body is larger than {} bytes", options.max_body_bytes));
    }
    set_error(res, res.status, status_text(res.status));
  });
}

std::string Server::Impl::metrics() const {
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  std::vector<std::pair<std::string, detail::ModelWorker::Snapshot>> snaps;
  for (const auto& [name, worker] : workers) snaps.emplace_back(name, worker->snapshot());
  family("weft_requests_total", "counter", "Predict requests answered, by status code.");
  for (const auto& [name, s] : snaps) {
    for (const auto& [code, count] : s.statuses) {
      out += fmt::format("weft_requests_total{{model=\"{}\",code=\"{}\"}} {}\n", name, code, count);
    }
  }
  family("weft_request_errors_total", "counter", "Predict requests answered with a 4xx or 5xx.");
  for (const auto& [name, s] : snaps) {
    std::uint64_t errors = 0;
    for (const auto& [code, count] : s.statuses) errors += code >= 400 ? count : 0;
    out += fmt::format("weft_request_errors_total{{model=\"{}\"}} {}\n", name, errors);
  }
  auto histogram = [&](const char* metric, const std::string& model, const detail::Histogram& h) {
    std::uint64_t cumulative = 0;
    for (std::size_t b = 0; b < h.bounds.size(); ++b) {
      cumulative += h.counts[b];
      out += fmt::format("{}_bucket{{model=\"{}\",le=\"{}\"}} {}\n", metric, model, h.bounds[b],
                         cumulative);
    }
    out += fmt::format("{}_bucket{{model=\"{}\",le=\"+Inf\"}} {}\n", metric, model, h.count);
    out += fmt::format("{}_sum{{model=\"{}\"}} {}\n", metric, model, h.sum);
    out += fmt::format("{}_count{{model=\"{}\"}} {}\n", metric, model, h.count);
  };
  family("weft_request_duration_seconds", "histogram", "Predict request latency in the server.");
  for (const auto& [name, s] : snaps) histogram("weft_request_duration_seconds", name, s.latency);
  family("weft_batch_size", "histogram", "Instances per batch run.");
  for (const auto& [name, s] : snaps) histogram("weft_batch_size", name, s.batch_sizes);
  family("weft_batches_total", "counter", "Batches run.");
  for (const auto& [name, s] : snaps) {
    out += fmt::format("weft_batches_total{{model=\"{}\"}} {}\n", name, s.stats.batches);
  }
  family("weft_shared_batches_total", "counter", "Batches holding instances of several requests.");
  for (const auto& [name, s] : snaps) {
    out +=
        fmt::format("weft_shared_batches_total{{model=\"{}\"}} {}\n", name, s.stats.shared_batches);
  }
  family("weft_examples_total", "counter", "Instances run in batches.");
  for (const auto& [name, s] : snaps) {
    out += fmt::format("weft_examples_total{{model=\"{}\"}} {}\n", name, s.stats.examples);
  }
  family("weft_examples_per_second", "gauge", "Instances run per second over the last 10 s.");
  for (const auto& [name, s] : snaps) {
    out +=
        fmt::format("weft_examples_per_second{{model=\"{}\"}} {}\n", name, s.examples_per_second);
  }
  family("weft_queue_depth", "gauge", "Instances waiting for a batch.");
  for (const auto& [name, s] : snaps) {
    out += fmt::format("weft_queue_depth{{model=\"{}\"}} {}\n", name, s.queue_depth);
  }
  family("weft_reloads_total", "counter", "Checkpoint reloads, by result.");
  for (const auto& [name, s] : snaps) {
    out +=
        fmt::format("weft_reloads_total{{model=\"{}\",result=\"ok\"}} {}\n", name, s.stats.reloads);
    out += fmt::format("weft_reloads_total{{model=\"{}\",result=\"failed\"}} {}\n", name,
                       s.reload_failures);
  }
  return out;
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Server::~Server() {
  stop();
  for (auto& [name, worker] : impl_->workers) worker->stop();
}

int Server::bind() {
  const std::string& host = impl_->options.host;
  int port = impl_->options.port;
  if (port == 0) {
    port = impl_->http.bind_to_any_port(host);
    if (port < 0) fail("weft serve", "cannot bind ", host, " to any port");
  } else if (!impl_->http.bind_to_port(host, port)) {
    fail("weft serve", "cannot bind ", host, ":", port, " (in use, or not an address here)");
  }
  impl_->http.widen_backlog(1024);
  impl_->port = port;
  return port;
}

void Server::serve() {
  if (impl_->port < 0) bind();
  if (!impl_->stopped) impl_->http.listen_after_bind();
  // listen returns once every connection's thread is done: the requests in flight are answered.
  for (auto& [name, worker] : impl_->workers) worker->stop();
}

void Server::stop() {
  impl_->stopped = true;
  impl_->http.stop();
}

int Server::port() const { return impl_->port; }

ModelStats Server::stats(const std::string& model) const {
  const auto it = impl_->workers.find(model);
  if (it == impl_->workers.end()) fail("weft serve", "unknown model '", model, "'");
  return it->second->stats();
}

std::string Server::metrics_text() const { return impl_->metrics(); }

}  // namespace weft::serve
