// The HTTP side of the server (cpp-httplib routes over the connections of http_front.h): input
// checks, parsing each instance on its own, handing instances to the model's worker, answers,
// authentication, reload confinement and the Prometheus metrics text.
#include "weft/serve/server.h"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <regex>

#include <fmt/format.h>

#include "http_front.h"
#include "model_worker.h"
#include "request_checks.h"
#include "weft/core/error.h"
#include "weft/io/utf8.h"
#include "weft/models/registry.h"
#include "weft/tensor/allocator.h"

namespace weft::serve {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

// Invalid UTF-8 in a message (a model quoting what it could not read) becomes U+FFFD rather
// than an exception while answering.
void set_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n",
                  "application/json");
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
    case 414:
      return "the URI is too long";
    case 503:
      return "service unavailable";
    default:
      return fmt::format("HTTP status {}", status);
  }
}

// The methods a known path answers; empty for a path that is not an endpoint.
std::string allowed_methods(const std::string& path) {
  static const std::regex model_action(R"(/v1/models/[^/:]+:(predict|reload))");
  if (std::regex_match(path, model_action)) return "POST";
  if (path == "/v1/models" || path == "/healthz" || path == "/metrics") return "GET, HEAD";
  return "";
}

detail::ConnectionLimits connection_limits(const ServerOptions& o) {
  detail::ConnectionLimits limits;
  limits.request.max_body_bytes = o.max_body_bytes;
  limits.header_timeout_s = o.header_timeout_s;
  limits.body_timeout_s = o.body_timeout_s;
  limits.idle_timeout_s = o.idle_timeout_s;
  limits.max_connections = o.max_connections;
  limits.max_requests_per_connection = std::max<std::size_t>(1, o.max_requests_per_connection);
  limits.workers = o.http_threads;
  return limits;
}

// A directory path, resolved, to compare reload paths against.
fs::path resolved_directory(const std::string& dir) {
  std::error_code error;
  const fs::path path = fs::canonical(dir, error);
  if (error || !fs::is_directory(path)) {
    fail("weft serve", "--allow-reload-from '", dir, "' is not a directory");
  }
  return path;
}

bool inside(const fs::path& dir, const fs::path& path) {
  const auto [d, p] = std::mismatch(dir.begin(), dir.end(), path.begin(), path.end());
  return d == dir.end() && p != path.end();
}

// `text` as a JSON string (quoted, control characters escaped, invalid UTF-8 replaced): what a
// log line may quote of what a client or a file chose.
std::string log_quoted(std::string_view text) {
  return json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
}

// A Prometheus metric family's HELP and TYPE lines.
void add_family(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

// A Prometheus histogram's lines for one model (cumulative buckets, sum, count).
void add_histogram(std::string& out, const char* metric, const std::string& model,
                   const detail::Histogram& h) {
  std::uint64_t cumulative = 0;
  for (std::size_t b = 0; b < h.bounds.size(); ++b) {
    cumulative += h.counts[b];
    out += fmt::format("{}_bucket{{model=\"{}\",le=\"{}\"}} {}\n", metric, model, h.bounds[b],
                       cumulative);
  }
  out += fmt::format("{}_bucket{{model=\"{}\",le=\"+Inf\"}} {}\n", metric, model, h.count);
  out += fmt::format("{}_sum{{model=\"{}\"}} {}\n", metric, model, h.sum);
  out += fmt::format("{}_count{{model=\"{}\"}} {}\n", metric, model, h.count);
}

// A predict request's answer before it is sent.
struct Answer {
  int status = 200;
  json body;
};

Answer error_answer(int status, std::string message) {
  return {status, json{{"error", std::move(message)}}};
}

}  // namespace

using Snapshots = std::vector<std::pair<std::string, detail::ModelWorker::Snapshot>>;

struct Server::Impl {
  explicit Impl(ServerOptions o) : options(std::move(o)), http(connection_limits(options)) {
    if (options.models.empty()) fail("weft serve", "no model to serve");
    if (options.max_beam < 1 || std::size_t(options.max_beam) > options.max_live_sequences)
      fail("weft serve", "--max-beam ", options.max_beam, " must be in [1, --max-live-sequences ",
           options.max_live_sequences, "]");
    for (const std::string& dir : options.allow_reload_from) {
      reload_dirs.push_back(resolved_directory(dir));
    }
    for (const ServedModel& m : options.models) {
      if (workers.count(m.name)) fail("weft serve", "model '", m.name, "' is given twice");
      models::find_model(m.name);  // throws naming the registered models
      workers.emplace(m.name, std::make_unique<detail::ModelWorker>(m.name, m.checkpoint, options));
      std::error_code error;
      const fs::path loaded = fs::canonical(m.checkpoint, error);
      if (!error) model_dirs[m.name] = loaded.parent_path();
    }
    setup_routes();
  }

  void setup_routes();
  void setup_checks();
  void predict(const std::string& name, const httplib::Request& req, httplib::Response& res);
  Answer answer_predict(detail::ModelWorker& worker, const httplib::Request& req, bool& abandoned);
  std::optional<Answer> read_instances(const detail::ModelWorker& worker, const std::string& body,
                                       json& instances, models::DecodeSettings& decode) const;
  std::optional<Answer> read_decode_settings(const detail::ModelWorker& worker, const json& body,
                                             models::DecodeSettings& decode) const;
  std::shared_ptr<detail::PendingRequest> submit_instances(detail::ModelWorker& worker,
                                                           const json& instances,
                                                           const models::DecodeSettings& decode,
                                                           bool interim_allowed) const;
  static Answer collect_predictions(detail::PendingRequest& pending);
  void reload(const std::string& name, const httplib::Request& req, httplib::Response& res);
  std::optional<std::string> confine_reload(const std::string& model,
                                            const std::string& checkpoint) const;
  detail::ModelWorker* find(const std::string& name, httplib::Response& res);
  std::string metrics() const;
  void http_metrics(std::string& out) const;
  static void decode_metrics(std::string& out, const Snapshots& snaps);
  static void memory_metrics(std::string& out, const Snapshots& snaps);

  ServerOptions options;
  std::map<std::string, std::unique_ptr<detail::ModelWorker>> workers;
  std::map<std::string, fs::path> model_dirs;  // where each model's first checkpoint lies
  std::vector<fs::path> reload_dirs;           // --allow-reload-from
  detail::HttpServer http;
  std::atomic<int> port{-1};
  std::atomic<bool> stopped{false};
};

detail::ModelWorker* Server::Impl::find(const std::string& name, httplib::Response& res) {
  const auto it = workers.find(name);
  if (it != workers.end()) return it->second.get();
  std::string known;
  for (const auto& [n, w] : workers) known += (known.empty() ? "" : ", ") + n;
  http.count_answer(404);
  set_error(res, 404, fmt::format("unknown model '{}'; this server has: {}", name, known));
  return nullptr;
}

void Server::Impl::predict(const std::string& name, const httplib::Request& req,
                           httplib::Response& res) {
  const auto start = Clock::now();
  detail::ModelWorker* worker = find(name, res);
  if (worker == nullptr) return;
  bool abandoned = false;
  const Answer answer = answer_predict(*worker, req, abandoned);
  set_json(res, answer.status, answer.body);
  if (answer.status == 503) res.set_header("Retry-After", "1");
  if (abandoned) return worker->record_cancelled();  // nobody reads it: counted apart
  worker->record_request(answer.status,
                         std::chrono::duration<double>(Clock::now() - start).count());
}

Answer Server::Impl::answer_predict(detail::ModelWorker& worker, const httplib::Request& req,
                                    bool& abandoned) {
  json instances;
  models::DecodeSettings decode;
  if (std::optional<Answer> refused = read_instances(worker, req.body, instances, decode))
    return *refused;
  try {
    const std::shared_ptr<detail::PendingRequest> pending =
        submit_instances(worker, instances, decode, req.version == "HTTP/1.1");
    if (!pending) {
      return error_answer(
          503, fmt::format("model '{}' is overloaded (queue full); retry later", worker.name()));
    }
    pending->wait();
    abandoned = pending->abandoned;
    return collect_predictions(*pending);
  } catch (const std::exception& e) {  // a bug, but answered and counted like any other
    return error_answer(500, fmt::format("internal error: {}", e.what()));
  }
}

// The body's instances, or why there are none to predict.
std::optional<Answer> Server::Impl::read_instances(const detail::ModelWorker& worker,
                                                   const std::string& body, json& instances,
                                                   models::DecodeSettings& decode) const {
  const std::string shape = R"(the body must be a JSON object {"instances": [...]})";
  if (body.empty()) return error_answer(400, shape + "; the body is empty");
  if (json_nesting_depth(body, options.max_depth) > options.max_depth) {
    return error_answer(400,
                        fmt::format("the body nests deeper than {} levels", options.max_depth));
  }
  if (const std::optional<std::size_t> bad = io::find_invalid_utf8(body)) {
    const long instance = detail::instance_at_offset(body, *bad);
    return error_answer(
        400, fmt::format("{}invalid UTF-8 at byte {} of the body (0x{:02X})",
                         instance >= 0 ? fmt::format("instance {}: ", instance) : "", *bad,
                         static_cast<unsigned char>(body[*bad])));
  }
  json parsed;
  try {
    parsed = json::parse(body);
  } catch (const json::exception& e) {
    return error_answer(400, fmt::format("malformed JSON: {}", e.what()));
  }
  if (!parsed.is_object() || !parsed.contains("instances") || !parsed["instances"].is_array()) {
    return error_answer(400, shape);
  }
  instances = std::move(parsed["instances"]);
  if (instances.empty()) return error_answer(400, "\"instances\" is empty");
  if (instances.size() > options.max_instances) {
    return error_answer(400, fmt::format("{} instances; at most {} per request", instances.size(),
                                         options.max_instances));
  }
  if (instances.size() > options.max_queue) {  // refused whole however empty the queue is
    return error_answer(400, fmt::format("{} instances can never fit the queue of model '{}' ({}; "
                                         "--max-queue)",
                                         instances.size(), worker.name(), options.max_queue));
  }
  return read_decode_settings(worker, parsed, decode);
}

// A request's "beam" (0: greedy, k: beam search of width k) or "max_steps" (positive), an
// integer from `least` up to `limit` (`over`: what a larger one is more than), into `out`.
static std::optional<Answer> read_bound(const json& body, const char* key, std::int64_t least,
                                        std::int64_t limit, const std::string& over,
                                        std::int64_t& out) {
  if (!body.contains(key)) return std::nullopt;
  const json& value = body[key];
  if (!value.is_number_integer() || value.get<std::int64_t>() < least)
    return error_answer(
        400, fmt::format("\"{}\" must be {}, got {}", key,
                         least == 0 ? "0 (greedy) or a positive integer (a beam search's width)"
                                    : "a positive integer",
                         value.dump(-1, ' ', false, json::error_handler_t::replace)));
  if (value.get<std::int64_t>() > limit)
    return error_answer(
        400, fmt::format("\"{}\": {} is more than {}", key, value.get<std::int64_t>(), over));
  out = value.get<std::int64_t>();
  return std::nullopt;
}

// A request's "length_penalty" (a number in [0, models::kMaxLengthPenalty]) into `out`.
static std::optional<Answer> read_length_penalty(const json& body, double& out) {
  if (!body.contains("length_penalty")) return std::nullopt;
  const json& value = body["length_penalty"];
  if (!value.is_number() || !(value.get<double>() >= 0.0) ||
      value.get<double>() > models::kMaxLengthPenalty)
    return error_answer(400,
                        fmt::format("\"length_penalty\" must be a number in [0, {}], got {}",
                                    models::kMaxLengthPenalty,
                                    value.dump(-1, ' ', false, json::error_handler_t::replace)));
  out = value.get<double>();
  return std::nullopt;
}

// A decoding request's search and step bound, checked against the server's limits.
std::optional<Answer> Server::Impl::read_decode_settings(const detail::ModelWorker& worker,
                                                         const json& body,
                                                         models::DecodeSettings& decode) const {
  if (!worker.decodes()) {
    if (!body.contains("beam") && !body.contains("max_steps") && !body.contains("length_penalty"))
      return std::nullopt;
    return error_answer(400, fmt::format("model '{}' does not decode: \"beam\", \"max_steps\" and "
                                         "\"length_penalty\" are for decoding models",
                                         worker.name()));
  }
  // Unless the request says, the model's own settings (its runtime options, as weft infer's)
  // within the server's bound on steps (0: the model's own bound).
  const models::DecodingModel& model = *worker.model()->decoding();
  decode = model.decode_settings();
  const std::int32_t bound = options.max_decode_steps;
  std::int64_t beam = decode.beam, steps = bound > 0 ? bound : decode.max_steps;
  if (auto refused =
          read_bound(body, "beam", 0, options.max_beam,
                     fmt::format("this server allows ({}; --max-beam)", options.max_beam), beam))
    return refused;
  if (beam > options.max_beam)  // the model's own option, which no request overrode
    return error_answer(400, fmt::format("the model's beam option ({}) is more than this server "
                                         "allows ({}; --max-beam): ask for \"beam\" in the request",
                                         beam, options.max_beam));
  // More steps than the server allows, or than the model ever takes, is refused, not capped.
  const std::int32_t longest = model.max_decode_steps();
  const std::string over =
      bound > 0 && bound <= longest
          ? fmt::format("this server allows ({}; --max-decode-steps)", bound)
          : fmt::format("model '{}' ever decodes ({} steps)", worker.name(), longest);
  if (auto refused = read_bound(body, "max_steps", 1,
                                bound > 0 ? std::min(bound, longest) : longest, over, steps))
    return refused;
  decode.beam = int(beam);
  decode.max_steps = std::int32_t(steps);
  return read_length_penalty(body, decode.length_penalty);
}

// Parses each instance on its own (a bad one fails alone) and queues the good ones; nullptr
// when the queue is full.
std::shared_ptr<detail::PendingRequest> Server::Impl::submit_instances(
    detail::ModelWorker& worker, const json& instances, const models::DecodeSettings& decode,
    bool interim_allowed) const {
  const std::shared_ptr<models::Model> model = worker.model();
  auto pending = std::make_shared<detail::PendingRequest>(instances.size());
  pending->client_fd = detail::HttpServer::answering_socket();
  pending->interim_allowed = interim_allowed;
  std::vector<detail::QueuedInstance> queued;
  std::vector<std::string> parse_errors(instances.size());
  for (std::size_t i = 0; i < instances.size(); ++i) {
    const std::string line =
        instances[i].is_string() ? instances[i].get<std::string>() : instances[i].dump();
    try {
      if (instances[i].is_string() && bracket_depth(line, options.max_depth) > options.max_depth) {
        fail("weft serve", "the text nests deeper than ", options.max_depth, " levels");
      }
      queued.push_back(
          {pending, i, model->parse_example(line, fmt::format("instance {}", i)), model, decode});
    } catch (const std::exception& e) {
      parse_errors[i] = e.what();
    }
  }
  if (!queued.empty() && !worker.submit(std::move(queued))) return nullptr;
  for (std::size_t i = 0; i < instances.size(); ++i) {
    if (!parse_errors[i].empty()) pending->finish(i, json(), parse_errors[i]);
  }
  return pending;
}

Answer Server::Impl::collect_predictions(detail::PendingRequest& pending) {
  json predictions = json::array();
  json errors = json::array();
  for (std::size_t i = 0; i < pending.results.size(); ++i) {
    if (pending.errors[i].empty()) {
      predictions.push_back(std::move(pending.results[i]));
      continue;
    }
    // Parse errors already say where ("instance 3: ..."); the worker's do not.
    const std::string where = fmt::format("instance {}", i);
    const std::string& what = pending.errors[i];
    const std::string message =
        what.find(where + ":") != std::string::npos ? what : where + ": " + what;
    predictions.push_back(json{{"error", message}});
    errors.push_back(json{{"index", i}, {"error", message}});
  }
  if (errors.empty()) return {200, json{{"predictions", std::move(predictions)}}};
  // 400 when any instance failed, naming each; the others' predictions are still there.
  const std::string first = errors[0]["error"].get<std::string>();
  const std::string summary = errors.size() == 1
                                  ? first
                                  : fmt::format("{} of {} instances failed; {}", errors.size(),
                                                pending.results.size(), first);
  return {400, json{{"error", summary},
                    {"errors", std::move(errors)},
                    {"predictions", std::move(predictions)}}};
}

// Why `checkpoint` may not be read by a reload of `model`, or nothing when it may. Symbolic
// links are resolved first, so a link inside an allowed directory cannot lead out of it.
std::optional<std::string> Server::Impl::confine_reload(const std::string& model,
                                                        const std::string& checkpoint) const {
  std::vector<fs::path> allowed = reload_dirs;
  if (const auto it = model_dirs.find(model); it != model_dirs.end()) allowed.push_back(it->second);
  std::error_code error;
  const fs::path resolved = fs::weakly_canonical(fs::absolute(checkpoint, error), error);
  if (!error) {
    for (const fs::path& dir : allowed) {
      if (inside(dir, resolved)) return std::nullopt;
    }
  }
  std::string places;
  for (const fs::path& dir : allowed) places += (places.empty() ? "" : ", ") + dir.string();
  return fmt::format(
      "reload from '{}' refused: checkpoints are reloaded only from {} (--allow-reload-from "
      "adds a directory)",
      checkpoint, places.empty() ? "no directory" : places);
}

void Server::Impl::reload(const std::string& name, const httplib::Request& req,
                          httplib::Response& res) {
  detail::ModelWorker* worker = find(name, res);
  if (worker == nullptr) return;
  std::string checkpoint = worker->checkpoint();
  if (!req.body.empty()) {
    const bool readable = json_nesting_depth(req.body, 8) <= 8 && !io::find_invalid_utf8(req.body);
    const json body = readable ? json::parse(req.body, nullptr, false) : json(nullptr);
    if (!body.is_object() || (body.contains("checkpoint") && !body["checkpoint"].is_string())) {
      return set_error(res, 400, R"(the body must be empty or {"checkpoint": "path"})");
    }
    if (body.contains("checkpoint")) checkpoint = body["checkpoint"].get<std::string>();
  }
  // A NUL would cut the path where the file system reads it, a newline forge a log line.
  if (const std::size_t at = detail::first_control_character(checkpoint, true);
      at != std::string::npos) {
    return set_error(res, 400,
                     fmt::format("the checkpoint path holds a control character at byte {}; "
                                 "such paths are refused",
                                 at));
  }
  if (const std::optional<std::string> refused = confine_reload(name, checkpoint)) {
    return set_error(res, 403, *refused);
  }
  try {
    worker->reload(checkpoint);
  } catch (const std::exception& e) {
    // The loader's message may quote the file (a header's bytes read as a length): it goes to
    // the server's log, one line with every part quoted and escaped as a JSON string; the client
    // learns only that the file is not a checkpoint it can load.
    std::cerr << fmt::format("weft serve: reload of {} from {} failed: {}\n", name,
                             log_quoted(checkpoint), log_quoted(e.what()));
    const bool exists = fs::exists(checkpoint);
    return set_error(
        res, 400,
        fmt::format("reload failed, the old checkpoint keeps serving: '{}' {}", checkpoint,
                    exists ? "is not a checkpoint of this model (the server's log says why)"
                           : "does not exist"));
  }
  set_json(res, 200, json{{"model", name}, {"checkpoint", checkpoint}, {"reloaded", true}});
}

// Before any route: authentication (/healthz excepted), then 405 for a known path asked with a
// method it does not answer.
void Server::Impl::setup_checks() {
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const bool health = req.path == "/healthz";
    if (!options.auth_token.empty() && !health) {
      const std::string given = req.get_header_value("Authorization");
      const std::string expected = "Bearer " + options.auth_token;
      if (!detail::same_secret(given, expected)) {
        res.set_header("WWW-Authenticate", "Bearer");
        http.count_answer(401);
        set_error(res, 401,
                  given.empty() ? "this server needs an Authorization: Bearer token"
                                : "the Authorization token is not this server's");
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    const std::string allow = allowed_methods(req.path);
    const bool get = req.method == "GET" || req.method == "HEAD";
    if (!allow.empty() && (allow == "POST" ? req.method != "POST" : !get)) {
      res.set_header("Allow", allow);
      http.count_answer(405);
      set_error(res, 405, fmt::format("{} answers {}, not {}", req.path, allow, req.method));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
}

void Server::Impl::setup_routes() {
  setup_checks();
  // No SO_REUSEPORT (cpp-httplib's default): a second server on a port in use must fail to
  // bind, not share the port and take half of the first one's requests.
  http.set_socket_options([](socket_t sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http.set_payload_max_length(options.max_body_bytes);
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
    if (!res.body.empty()) return;  // a handler's answer, counted where it was given
    http.count_answer(res.status);
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
    add_family(out, name, type, help);
  };
  Snapshots snaps;
  for (const auto& [name, worker] : workers) snaps.emplace_back(name, worker->snapshot());
  family("weft_requests_total", "counter", "Predict requests answered, by status code.");
  for (const auto& [name, s] : snaps) {
    for (const auto& [code, count] : s.statuses) {
      out += fmt::format("weft_requests_total{{model=\"{}\",code=\"{}\"}} {}\n", name, code, count);
    }
  }
  family("weft_requests_cancelled_total", "counter",
         "Predict requests whose client went away before the answer (in no status).");
  for (const auto& [name, s] : snaps)
    out +=
        fmt::format("weft_requests_cancelled_total{{model=\"{}\"}} {}\n", name, s.stats.cancelled);
  family("weft_request_errors_total", "counter", "Predict requests answered with a 4xx or 5xx.");
  for (const auto& [name, s] : snaps) {
    std::uint64_t errors = 0;
    for (const auto& [code, count] : s.statuses) errors += code >= 400 ? count : 0;
    out += fmt::format("weft_request_errors_total{{model=\"{}\"}} {}\n", name, errors);
  }
  auto histogram = [&](const char* metric, const std::string& model, const detail::Histogram& h) {
    add_histogram(out, metric, model, h);
  };
  family("weft_request_duration_seconds", "histogram", "Predict request latency in the server.");
  for (const auto& [name, s] : snaps) histogram("weft_request_duration_seconds", name, s.latency);
  family("weft_batch_size", "histogram", "Instances per batch run.");
  for (const auto& [name, s] : snaps) histogram("weft_batch_size", name, s.batch_sizes);
  auto per_model = [&](const char* name, const char* type, const char* help, auto value) {
    family(name, type, help);
    for (const auto& [model, s] : snaps) {
      out += fmt::format("{}{{model=\"{}\"}} {}\n", name, model, value(s));
    }
  };
  using Snapshot = detail::ModelWorker::Snapshot;
  per_model("weft_batches_total", "counter", "Batches run.",
            [](const Snapshot& s) { return s.stats.batches; });
  per_model("weft_shared_batches_total", "counter",
            "Batches holding instances of several requests.",
            [](const Snapshot& s) { return s.stats.shared_batches; });
  per_model("weft_examples_total", "counter", "Instances run in batches.",
            [](const Snapshot& s) { return s.stats.examples; });
  per_model("weft_examples_per_second", "gauge", "Instances run per second over the last 10 s.",
            [](const Snapshot& s) { return s.examples_per_second; });
  per_model("weft_queue_depth", "gauge", "Instances waiting for a batch.",
            [](const Snapshot& s) { return s.queue_depth; });
  family("weft_reloads_total", "counter", "Checkpoint reloads, by result.");
  for (const auto& [name, s] : snaps) {
    out +=
        fmt::format("weft_reloads_total{{model=\"{}\",result=\"ok\"}} {}\n", name, s.stats.reloads);
    out += fmt::format("weft_reloads_total{{model=\"{}\",result=\"failed\"}} {}\n", name,
                       s.reload_failures);
  }
  decode_metrics(out, snaps);
  memory_metrics(out, snaps);
  http_metrics(out);
  return out;
}

// The decoding models' families (decoding_loop.h): steps, sequences, tokens, latencies.
void Server::Impl::decode_metrics(std::string& out, const Snapshots& snaps) {
  using Decode = detail::DecodeStats;
  if (std::none_of(snaps.begin(), snaps.end(), [](const auto& s) { return s.second.decodes; }))
    return;
  const auto per_model = [&](const char* name, const char* type, const char* help, auto value) {
    add_family(out, name, type, help);
    for (const auto& [model, s] : snaps)
      if (s.decodes) out += fmt::format("{}{{model=\"{}\"}} {}\n", name, model, value(s.decode));
  };
  per_model("weft_decode_steps_total", "counter", "Decoding steps run (one loom batch each).",
            [](const Decode& d) { return d.steps; });
  per_model("weft_decode_steps_per_second", "gauge", "Decoding steps per second over 10 s.",
            [](const Decode& d) { return d.steps_per_second; });
  per_model("weft_decode_live_sequences", "gauge", "Sequences decoding now (a beam counts k).",
            [](const Decode& d) { return d.live; });
  per_model("weft_decode_tokens_total", "counter", "Tokens generated (a live program's step).",
            [](const Decode& d) { return d.tokens; });
  per_model("weft_decode_tokens_per_second", "gauge", "Tokens generated per second over 10 s.",
            [](const Decode& d) { return d.tokens_per_second; });
  per_model("weft_decode_sequences_total", "counter", "Sequences answered (done or failed).",
            [](const Decode& d) { return d.sequences; });
  per_model("weft_decode_cancelled_total", "counter",
            "Sequences retired because their client went away.",
            [](const Decode& d) { return d.cancelled; });
  per_model("weft_decode_dropped_total", "counter",
            "Queued instances dropped before encoding because their client went away.",
            [](const Decode& d) { return d.dropped; });
  per_model("weft_decode_cpu_seconds_total", "counter",
            "CPU time of the decoding thread (admitting, encoding, stepping, answering).",
            [](const Decode& d) { return d.cpu_seconds; });
  per_model("weft_decode_generations", "gauge", "Engines (each on its own tape) held now.",
            [](const Decode& d) { return d.generations; });
  per_model("weft_decode_tape_nodes", "gauge", "Values recorded on the engines' tapes now.",
            [](const Decode& d) { return d.tape_nodes; });
  const auto histograms = [&](const char* name, const char* help, auto pick) {
    add_family(out, name, "histogram", help);
    for (const auto& [model, s] : snaps)
      if (s.decodes) add_histogram(out, name, model, pick(s.decode));
  };
  histograms("weft_decode_time_to_first_step_seconds", "From queued to its first step run.",
             [](const Decode& d) -> const detail::Histogram& { return d.first_step; });
  histograms("weft_decode_step_seconds", "One decoding step (every generation's engine).",
             [](const Decode& d) -> const detail::Histogram& { return d.step_seconds; });
}

// The tensor pool's bytes, and the idle spells that handed its cache back.
void Server::Impl::memory_metrics(std::string& out, const Snapshots& snaps) {
  add_family(out, "weft_memory_releases_total", "counter",
             "Idle spells after which a model's worker handed the tensor pools' cache back.");
  for (const auto& [model, s] : snaps)
    out += fmt::format("weft_memory_releases_total{{model=\"{}\"}} {}\n", model,
                       s.stats.memory_releases);
  const AllocatorStats pool = allocator_stats(Device::kCpu);
  add_family(out, "weft_memory_bytes", "gauge",
             "The CPU tensor pool: bytes in tensors now, and freed bytes kept for reuse.");
  out += fmt::format("weft_memory_bytes{{kind=\"in_use\"}} {}\n", pool.bytes_in_use);
  out += fmt::format("weft_memory_bytes{{kind=\"cached\"}} {}\n", pool.bytes_cached);
}

// The connections' families: answers that reached no model, connections open.
void Server::Impl::http_metrics(std::string& out) const {
  add_family(out, "weft_http_errors_total", "counter",
             "Answers that reached no model, by status: framing, limits, timeouts (408), "
             "authentication (401), unknown endpoints, too many connections (503).");
  for (int code = 400; code < 600; ++code) {
    if (const std::uint64_t n = http.front_answers(code)) {
      out += fmt::format("weft_http_errors_total{{code=\"{}\"}} {}\n", code, n);
    }
  }
  add_family(out, "weft_open_connections", "gauge", "Connections open now.");
  out += fmt::format("weft_open_connections {}\n", http.open_connections());
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
    fail("weft serve", "cannot listen on ", host, ":", port,
         " (the address is in use, or not an address of this machine)");
  }
  // Debian's cpp-httplib listens with a backlog of 5 (compiled into the library), so a burst of
  // clients connecting at once overflows it; Linux lets a second listen() raise the backlog.
  ::listen(impl_->http.listening_socket(), 1024);
  impl_->port = port;
  return port;
}

void Server::serve() {
  if (impl_->port < 0) bind();
  if (!impl_->stopped) {
    impl_->http.start_connections();
    impl_->http.listen_after_bind();
  }
  // The requests that arrived whole are answered before the workers stop.
  impl_->http.drain();
  for (auto& [name, worker] : impl_->workers) worker->stop();
}

void Server::stop() {
  impl_->stopped = true;
  impl_->http.stop_listening();
}

int Server::port() const { return impl_->port; }

ModelStats Server::stats(const std::string& model) const {
  const auto it = impl_->workers.find(model);
  if (it == impl_->workers.end()) fail("weft serve", "unknown model '", model, "'");
  return it->second->stats();
}

std::string Server::metrics_text() const { return impl_->metrics(); }

std::string Server::answer_raw(std::string_view request) const {
  return impl_->http.answer_raw(request);
}

}  // namespace weft::serve
