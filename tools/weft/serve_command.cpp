// `weft serve`: the inference server (weft/serve/server.h) from the command line. SIGTERM and
// SIGINT stop accepting connections, finish the requests in flight and exit 0.
#include <fmt/core.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <csignal>
#include <fstream>
#include <iostream>
#include <thread>

#include "commands.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/models/saved_model.h"
#include "weft/serve/server.h"

namespace weft::tool {

namespace {
// Batching and request limits of `weft serve`.
void add_serve_batching(CLI::App& cmd, ServeOptions& options) {
  cmd.add_option("--max-wait-ms", options.max_wait_ms,
                 "Under load, how long a batch waits for more instances")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1000.0));
  cmd.add_option("--max-batch", options.max_batch, "Instances per batch (1: no batching)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd.add_option("--max-queue", options.max_queue,
                 "Queued instances per model before 503 (a request of more is a 400)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  cmd.add_option("--max-body-bytes", options.max_body_bytes, "Largest request body (else 413)")
      ->capture_default_str()
      ->check(CLI::Range(64, 1 << 30));
  cmd.add_option("--max-instances", options.max_instances, "Instances per request")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd.add_option("--max-depth", options.max_depth, "Deepest nesting of a body or instance")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd.add_option("--http-threads", options.http_threads,
                 "Connections served at once (a keep-alive client holds one)")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
}

// Connection deadlines and bounds, reload confinement and authentication.
void add_serve_guards(CLI::App& cmd, ServeOptions& options) {
  cmd.add_option("--header-timeout-s", options.header_timeout_s,
                 "A request's headers must arrive within this of its first byte (else 408)")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  cmd.add_option("--body-timeout-s", options.body_timeout_s,
                 "A request's body must arrive within this of its headers (else 408)")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  cmd.add_option("--idle-timeout-s", options.idle_timeout_s,
                 "An idle keep-alive connection is closed after this")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  cmd.add_option("--max-connections", options.max_connections,
                 "Connections open at once (more are answered 503); the fd limit is raised")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd.add_option("--release-memory-idle-s", options.release_memory_idle_s,
                 "After this long with nothing queued, hand the tensor pool's cached memory "
                 "back to the system (0: never)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  cmd.add_option("--max-requests-per-connection", options.max_requests_per_connection,
                 "Requests on one keep-alive connection before it is closed")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 30));
  cmd.add_option("--allow-reload-from", options.allow_reload_from,
                 "Another directory :reload may read checkpoints from (repeatable)");
  cmd.add_option("--auth-token-file", options.auth_token_file,
                 "A file holding a bearer token every request but /healthz must present")
      ->check(CLI::ExistingFile);
}

// How models that decode are served (iteration-level batching and its bounds).
void add_serve_decoding(CLI::App& cmd, ServeOptions& options) {
  cmd.add_flag("--whole-batch-decoding", options.whole_batch_decoding,
               "Decoding models: a batch decodes to its end before the next joins (the "
               "baseline; by default requests join and leave between steps)");
  cmd.add_option("--max-live-sequences", options.max_live_sequences,
                 "Sequences decoding at once (a beam of k counts k); more wait in the queue")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd.add_option("--max-beam", options.max_beam, "The widest \"beam\" a request may ask for")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd.add_option("--max-decode-steps", options.max_decode_steps,
                 "The most \"max_steps\" a request may ask for (0: the model's own bound)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 24));
}
}  // namespace

CLI::App* add_serve(CLI::App& app, ServeOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve models over HTTP/1.1 JSON, batching concurrent requests through the loom.\n"
      "  POST /v1/models/<name>:predict  {\"instances\": [...]} -> {\"predictions\": [...]}\n"
      "  POST /v1/models/<name>:reload   {\"checkpoint\": F} (optional) swaps in a checkpoint\n"
      "  GET /v1/models, /healthz, /metrics (Prometheus text)\n"
      "An instance is a JSON value or a string in the model's text form (a line of weft infer).\n"
      "A request with a bad instance answers 400 with \"errors\" naming each bad index and\n"
      "the other instances' predictions in place; 503 + Retry-After when the queue is full;\n"
      "413 for a body over --max-body-bytes; 404 for an unknown model.\n"
      "Guarantees to a hostile client: a request's headers must arrive within\n"
      "--header-timeout-s of its first byte and its body within --body-timeout-s (totals,\n"
      "else 408 and the connection closes); an idle keep-alive connection closes after\n"
      "--idle-timeout-s; a chunked body is bounded by --max-body-bytes as it arrives (413);\n"
      "idle and slow connections hold no thread (at most --max-connections open, then 503);\n"
      "a port in use is an error, never shared. :reload reads only from the directory of\n"
      "the model's checkpoint and --allow-reload-from directories, and its errors never\n"
      "quote a file. --auth-token-file: every request but GET /healthz needs\n"
      "'Authorization: Bearer <token>' (else 401); a non-loopback --host without it warns.");
  cmd->add_option("model", options.model, "The model to serve (default: the checkpoint's)");
  cmd->add_option("--checkpoint", options.checkpoint, "Its self-contained checkpoint");
  cmd->add_option("--model", options.models, "Another model as name=checkpoint (repeatable)");
  cmd->add_option("--host", options.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", options.port, "Port (0: any free port, printed on stderr)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  add_serve_batching(*cmd, options);
  add_serve_guards(*cmd, options);
  add_serve_decoding(*cmd, options);
  cmd->add_option("--threads", options.threads, "Compute (GEMM) threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  return cmd;
}

namespace {
// The token is the file's first line, without surrounding spaces.
std::string read_auth_token(const std::string& path) {
  std::ifstream in(path);
  std::string token;
  if (!in || !std::getline(in, token)) fail("weft serve", "cannot read --auth-token-file ", path);
  const std::size_t first = token.find_first_not_of(" \t\r");
  const std::size_t last = token.find_last_not_of(" \t\r");
  token = first == std::string::npos ? "" : token.substr(first, last - first + 1);
  if (token.size() < 16) {
    fail("weft serve", "--auth-token-file ", path, " holds a token of ", token.size(),
         " characters; use at least 16 (e.g. `openssl rand -hex 32`)");
  }
  return token;
}

// Room for --max-connections sockets and the server's own files: the soft limit on open files
// (often 1024) is raised as far as the hard limit allows.
void raise_open_file_limit(std::int64_t connections) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t wanted = rlim_t(connections) + 256;
  if (limit.rlim_cur >= wanted) return;
  limit.rlim_cur = std::min(wanted, limit.rlim_max);
  setrlimit(RLIMIT_NOFILE, &limit);
}
}  // namespace

serve::ServerOptions server_options(const ServeOptions& options) {
  serve::ServerOptions out;
  out.host = options.host;
  out.port = options.port;
  out.max_wait_ms = options.max_wait_ms;
  out.max_batch = std::size_t(options.max_batch);
  out.max_queue = std::size_t(options.max_queue);
  out.max_body_bytes = std::size_t(options.max_body_bytes);
  out.max_instances = std::size_t(options.max_instances);
  out.max_depth = options.max_depth;
  out.http_threads = options.http_threads;
  out.header_timeout_s = options.header_timeout_s;
  out.body_timeout_s = options.body_timeout_s;
  out.idle_timeout_s = options.idle_timeout_s;
  out.max_connections = std::size_t(options.max_connections);
  out.max_requests_per_connection = std::size_t(options.max_requests_per_connection);
  out.allow_reload_from = options.allow_reload_from;
  out.iteration_level = !options.whole_batch_decoding;
  out.max_live_sequences = std::size_t(options.max_live_sequences);
  out.max_beam = options.max_beam;
  out.max_decode_steps = options.max_decode_steps;
  out.release_memory_idle_s = options.release_memory_idle_s;
  if (!options.auth_token_file.empty()) out.auth_token = read_auth_token(options.auth_token_file);
  if (!options.checkpoint.empty()) {
    const std::string name =
        options.model.empty() ? models::read_saved_model(options.checkpoint).name : options.model;
    out.models.push_back({name, options.checkpoint});
  } else if (!options.model.empty()) {
    fail("weft serve", "model '", options.model, "' needs --checkpoint");
  }
  for (const std::string& spec : options.models) {
    const std::size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      fail("weft serve", "--model takes name=checkpoint, got '", spec, "'");
    }
    out.models.push_back({spec.substr(0, eq), spec.substr(eq + 1)});
  }
  if (out.models.empty()) fail("weft serve", "nothing to serve: give --checkpoint or --model");
  return out;
}

namespace {
// The signal handler only writes a byte to a pipe (async-signal-safe); a watcher thread reads it
// and stops the server. A handler rather than a blocked mask: threads started before serve (the
// GEMM library's) would otherwise take the signal's default action.
int signal_pipe[2] = {-1, -1};
volatile std::sig_atomic_t last_signal = 0;
extern "C" void on_stop_signal(int signal) {
  last_signal = signal;
  const char byte = 1;
  [[maybe_unused]] const auto n = write(signal_pipe[1], &byte, 1);
}
}  // namespace

int run_serve(const ServeOptions& options) {
  set_num_threads(options.threads);
  raise_open_file_limit(options.max_connections);
  const serve::ServerOptions server_settings = server_options(options);
  serve::Server server(server_settings);
  const int port = server.bind();
  if (server_settings.auth_token.empty() && !serve::is_loopback_host(options.host)) {
    std::cerr << fmt::format(
        "weft serve: warning: listening on {} (reachable from the network) without "
        "--auth-token-file: anyone who can reach it can predict and reload\n",
        options.host);
  }
  std::string names;
  for (const serve::ServedModel& m : server_settings.models) {
    names += fmt::format(" {}={}", m.name, m.checkpoint);
  }
  if (pipe(signal_pipe) != 0) fail("weft serve", "cannot create a pipe for signals");
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  std::cerr << fmt::format(
                   "weft serve: listening on http://{}:{} ({} max batch, {} ms wait, "
                   "batch-invariant {}):{}\n",
                   options.host, port, options.max_batch, options.max_wait_ms,
                   batch_invariant() ? "on" : "off", names)
            << std::flush;
  std::thread watcher([&] {
    char byte = 0;
    while (read(signal_pipe[0], &byte, 1) < 0 && errno == EINTR) {
    }
    if (last_signal == 0) return;  // woken by serve() ending on its own
    std::cerr << "weft serve: " << (last_signal == SIGTERM ? "SIGTERM" : "SIGINT")
              << ", draining the requests in flight\n"
              << std::flush;
    server.stop();
  });
  server.serve();
  if (last_signal == 0) {
    const char byte = 0;
    [[maybe_unused]] const auto n = write(signal_pipe[1], &byte, 1);
  }
  watcher.join();
  std::cerr << "weft serve: stopped\n";
  return 0;
}

}  // namespace weft::tool
