// `weft bench serve`: a closed-loop load generator for the inference server, on loopback only.
// It serves one checkpoint in-process twice (batching on, and --max-batch 1, the baseline), or
// measures a running server (--port), at each concurrency: throughput, latency percentiles, the
// server's mean batch size and errors, as a table, CSV or JSON, and an SVG plot. --decoding: a
// decoding load (short and long outputs of the countdown model) served with iteration-level
// batching and whole-batch, alternated, with latency by output length and steps per second.
#include <fmt/core.h>

#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <latch>
#include <memory>
#include <sstream>
#include <thread>

#include "bench_output.h"
#include "commands.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/core/memory_usage.h"
#include "weft/models/countdown.h"
#include "weft/models/registry.h"
#include "weft/models/saved_model.h"
#include "weft/serve/client.h"
#include "weft/serve/server.h"

namespace weft::tool {
namespace {

using Clock = std::chrono::steady_clock;

struct Point {
  std::string server;  // batched | baseline | external
  int round = 0;
  int concurrency = 0;
  std::size_t requests = 0;
  std::size_t errors = 0;
  double seconds = 0;
  double throughput = 0;  // answered requests per second
  double p50_ms = 0, p95_ms = 0, p99_ms = 0, mean_ms = 0;
  double server_mean_ms = 0;  // the server's own mean latency (its /metrics histogram)
  double mean_batch = 0;
  double rss_mb = 0;
  // A decoding load: latency of the short and the long outputs, decoding steps per second.
  double short_p50_ms = 0, short_p99_ms = 0, long_p50_ms = 0, long_p99_ms = 0;
  double steps_per_s = 0;
  // CPU per unit of work, which the machine's other load does not inflate: the decoding
  // thread's per token generated, and this whole process's (clients, HTTP threads, the
  // decoding) per answered request.
  double decode_cpu_us_per_token = 0, process_cpu_us_per_request = 0;
};

// This process's CPU seconds (user + system, every thread).
double process_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Sums of one metric's samples (any labels) in a Prometheus text.
double metric_sum(const std::string& text, const std::string& name) {
  double total = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name, 0) != 0) continue;
    const std::size_t after = name.size();
    if (after < line.size() && line[after] != '{' && line[after] != ' ') continue;
    total += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return total;
}

struct Figures {
  double examples = 0, batches = 0, latency_sum = 0, latency_count = 0;
  double steps = 0, tokens = 0, decode_cpu = 0;  // a decoding model's
};

Figures server_figures(int port) {
  serve::HttpClient client("127.0.0.1", port);
  const serve::HttpResult r = client.get("/metrics");
  if (r.status != 200) fail("weft bench serve", "GET /metrics failed: ", r.error, r.body);
  return {metric_sum(r.body, "weft_examples_total"),
          metric_sum(r.body, "weft_batches_total"),
          metric_sum(r.body, "weft_request_duration_seconds_sum"),
          metric_sum(r.body, "weft_request_duration_seconds_count"),
          metric_sum(r.body, "weft_decode_steps_total"),
          metric_sum(r.body, "weft_decode_tokens_total"),
          metric_sum(r.body, "weft_decode_cpu_seconds_total")};
}

double percentile(std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const std::size_t i = std::min(sorted.size() - 1, std::size_t(q * double(sorted.size())));
  return sorted[i];
}

// The latency figures of (body, ms) samples: every one, and by the bodies' class (0 short,
// 1 long) when `classes` gives them.
Point latency_point(std::vector<std::pair<std::size_t, double>>& samples,
                    const std::vector<int>& classes) {
  std::vector<double> all, by_class[2];
  for (const auto& [body, ms] : samples) {
    all.push_back(ms);
    if (!classes.empty()) by_class[classes[body]].push_back(ms);
  }
  for (auto* v : {&all, &by_class[0], &by_class[1]}) std::sort(v->begin(), v->end());
  Point p;
  p.requests = all.size();
  p.p50_ms = percentile(all, 0.50);
  p.p95_ms = percentile(all, 0.95);
  p.p99_ms = percentile(all, 0.99);
  double sum = 0;
  for (double v : all) sum += v;
  p.mean_ms = all.empty() ? 0 : sum / double(all.size());
  p.short_p50_ms = percentile(by_class[0], 0.50);
  p.short_p99_ms = percentile(by_class[0], 0.99);
  p.long_p50_ms = percentile(by_class[1], 0.50);
  p.long_p99_ms = percentile(by_class[1], 0.99);
  return p;
}

Point measure(int port, const std::string& model, const std::vector<std::string>& bodies,
              const std::vector<int>& classes, int concurrency, const BenchServeOptions& options) {
  const std::string path = "/v1/models/" + model + ":predict";
  const Figures before = server_figures(port);
  std::atomic<std::size_t> issued{0};
  std::atomic<std::size_t> errors{0};
  // (body, ms) per client.
  std::vector<std::vector<std::pair<std::size_t, double>>> latencies(
      static_cast<std::size_t>(concurrency));
  std::latch ready(concurrency + 1);
  std::atomic<bool> go{false};
  Clock::time_point start, deadline;
  std::vector<std::thread> clients;
  for (int c = 0; c < concurrency; ++c) {
    clients.emplace_back([&, c] {
      serve::HttpClient client("127.0.0.1", port);
      // One untimed request opens the connection.
      client.post(path, bodies[std::size_t(c) % bodies.size()]);
      ready.count_down();
      while (!go.load()) std::this_thread::yield();
      for (;;) {
        const std::size_t n = issued.fetch_add(1);
        if (n >= std::size_t(options.requests) || Clock::now() > deadline) break;
        const auto t0 = Clock::now();
        const serve::HttpResult r = client.post(path, bodies[n % bodies.size()]);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (r.status != 200) {
          ++errors;
        } else {
          latencies[std::size_t(c)].emplace_back(n % bodies.size(), ms);
        }
      }
    });
  }
  ready.arrive_and_wait();
  const double cpu_before = process_cpu_seconds();
  start = Clock::now();
  deadline = start + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(options.seconds));
  go = true;
  for (std::thread& t : clients) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu = process_cpu_seconds() - cpu_before;
  const Figures after = server_figures(port);
  std::vector<std::pair<std::size_t, double>> samples;
  for (const auto& l : latencies) samples.insert(samples.end(), l.begin(), l.end());
  Point p = latency_point(samples, classes);
  p.concurrency = concurrency;
  p.errors = errors;
  p.seconds = seconds;
  p.throughput = double(p.requests) / seconds;
  const double batches = after.batches - before.batches, steps = after.steps - before.steps;
  p.mean_batch = batches > 0 ? (after.examples - before.examples) / batches : 0;
  if (steps > 0) p.mean_batch = (after.tokens - before.tokens) / steps;  // live per step
  p.steps_per_s = steps / seconds;
  const double tokens = after.tokens - before.tokens;
  p.decode_cpu_us_per_token =
      tokens > 0 ? 1e6 * (after.decode_cpu - before.decode_cpu) / tokens : 0;
  p.process_cpu_us_per_request = p.requests > 0 ? 1e6 * cpu / double(p.requests) : 0;
  const double answered = after.latency_count - before.latency_count;
  p.server_mean_ms = answered > 0 ? 1000 * (after.latency_sum - before.latency_sum) / answered : 0;
  p.rss_mb = peak_rss_mb();
  return p;
}

std::vector<std::string> read_lines(const std::string& file) {
  std::ifstream in(file);
  if (!in) fail("weft bench serve", "cannot read '", file, "' (give --input)");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    lines.push_back(line);
  }
  if (lines.empty()) fail("weft bench serve", "'", file, "' holds no instances");
  return lines;
}

// A predict request of one instance.
std::string request_body(const std::string& instance) {
  return nlohmann::json{{"instances", {instance}}}.dump();
}

std::vector<std::string> read_bodies(const std::string& file) {
  std::vector<std::string> bodies;
  for (const std::string& line : read_lines(file)) bodies.push_back(request_body(line));
  return bodies;
}

std::string render(const std::vector<Point>& points, const std::string& format) {
  std::string out;
  if (format == "json") {
    nlohmann::json rows = nlohmann::json::array();
    for (const Point& p : points) {
      rows.push_back({{"server", p.server},
                      {"round", p.round},
                      {"concurrency", p.concurrency},
                      {"requests", p.requests},
                      {"errors", p.errors},
                      {"seconds", p.seconds},
                      {"throughput", p.throughput},
                      {"p50_ms", p.p50_ms},
                      {"p95_ms", p.p95_ms},
                      {"p99_ms", p.p99_ms},
                      {"mean_ms", p.mean_ms},
                      {"server_mean_ms", p.server_mean_ms},
                      {"mean_batch", p.mean_batch},
                      {"peak_rss_mb", p.rss_mb},
                      {"short_p50_ms", p.short_p50_ms},
                      {"short_p99_ms", p.short_p99_ms},
                      {"long_p50_ms", p.long_p50_ms},
                      {"long_p99_ms", p.long_p99_ms},
                      {"steps_per_s", p.steps_per_s},
                      {"decode_cpu_us_per_token", p.decode_cpu_us_per_token},
                      {"process_cpu_us_per_request", p.process_cpu_us_per_request}});
    }
    return rows.dump(2) + "\n";
  }
  const bool csv = format == "csv";
  const bool decoding =
      std::any_of(points.begin(), points.end(), [](const Point& p) { return p.steps_per_s > 0; });
  out += csv ? "server,round,concurrency,requests,errors,seconds,throughput,p50_ms,p95_ms,p99_ms,"
               "mean_ms,server_mean_ms,mean_batch,peak_rss_mb,short_p50_ms,short_p99_ms,"
               "long_p50_ms,long_p99_ms,steps_per_s,decode_cpu_us_per_token,"
               "process_cpu_us_per_request\n"
             : fmt::format(
                   "{:<10} {:>5} {:>5} {:>8} {:>6} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} "
                   "{:>7} {:>8}{}\n",
                   "server", "round", "conc", "requests", "errors", "req/s", "p50 ms", "p95 ms",
                   "p99 ms", "mean ms", "srv ms", "batch", "rss MB",
                   decoding ? "  short p50  short p99   long p50   long p99    steps/s  dec us/tok"
                              "  cpu us/req"
                            : "");
  for (const Point& p : points) {
    out +=
        csv ? fmt::format(
                  "{},{},{},{},{},{:.3f},{:.1f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.2f},"
                  "{:.1f},{:.3f},{:.3f},{:.3f},{:.3f},{:.1f},{:.3f},{:.1f}\n",
                  p.server, p.round, p.concurrency, p.requests, p.errors, p.seconds, p.throughput,
                  p.p50_ms, p.p95_ms, p.p99_ms, p.mean_ms, p.server_mean_ms, p.mean_batch, p.rss_mb,
                  p.short_p50_ms, p.short_p99_ms, p.long_p50_ms, p.long_p99_ms, p.steps_per_s,
                  p.decode_cpu_us_per_token, p.process_cpu_us_per_request)
            : fmt::format(
                  "{:<10} {:>5} {:>5} {:>8} {:>6} {:>10.1f} {:>8.2f} {:>8.2f} {:>8.2f} "
                  "{:>8.2f} {:>8.2f} {:>7.2f} {:>8.1f}{}\n",
                  p.server, p.round, p.concurrency, p.requests, p.errors, p.throughput, p.p50_ms,
                  p.p95_ms, p.p99_ms, p.mean_ms, p.server_mean_ms, p.mean_batch, p.rss_mb,
                  decoding ? fmt::format(" {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.1f} "
                                         "{:>11.2f} {:>11.1f}",
                                         p.short_p50_ms, p.short_p99_ms, p.long_p50_ms,
                                         p.long_p99_ms, p.steps_per_s, p.decode_cpu_us_per_token,
                                         p.process_cpu_us_per_request)
                           : "");
  }
  return out;
}

// p50 and p99 latency against throughput, one line per server and percentile.
std::string svg_plot(const std::vector<Point>& points) {
  const double w = 720, h = 440, left = 70, right = 20, top = 30, bottom = 50;
  double max_x = 1, max_y = 1;
  for (const Point& p : points) {
    max_x = std::max(max_x, p.throughput);
    max_y = std::max(max_y, p.p99_ms);
  }
  max_x *= 1.05;
  max_y *= 1.05;
  auto x = [&](double v) { return left + (w - left - right) * v / max_x; };
  auto y = [&](double v) { return h - bottom - (h - top - bottom) * v / max_y; };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n<text x=\"{}\" y=\"18\">weft serve: latency vs throughput (closed loop; "
      "labels: concurrency)</text>\n",
      w, h, left);
  s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", left,
                   h - bottom, w - right);
  s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", left,
                   top, h - bottom);
  for (int i = 0; i <= 4; ++i) {
    const double vx = max_x * i / 4, vy = max_y * i / 4;
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{:.0f}</text>\n", x(vx),
                     h - bottom + 16, vx);
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:.1f}</text>\n", left - 6,
                     y(vy) + 4, vy);
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">requests/s</text>\n",
                   (left + w - right) / 2, h - 12);
  s += fmt::format(
      "<text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" "
      "text-anchor=\"middle\">latency (ms)</text>\n",
      (top + h - bottom) / 2, (top + h - bottom) / 2);
  const std::vector<std::string> servers{"batched", "baseline", "external", "iterative",
                                         "wholebatch"};
  const std::vector<std::string> colors{"#1f77b4", "#d62728", "#2ca02c", "#1f77b4", "#d62728"};
  int legend = 0;
  for (std::size_t k = 0; k < servers.size(); ++k) {
    for (int q = 0; q < 2; ++q) {
      std::vector<const Point*> line;
      for (const Point& p : points) {
        if (p.server == servers[k] && p.round == 0) line.push_back(&p);
      }
      if (line.empty()) continue;
      std::string pts;
      for (const Point* p : line) {
        pts += fmt::format("{:.1f},{:.1f} ", x(p->throughput), y(q ? p->p99_ms : p->p50_ms));
        s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"9\">{}</text>\n",
                         x(p->throughput) + 3, y(q ? p->p99_ms : p->p50_ms) - 3, p->concurrency);
      }
      s += fmt::format(
          "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}/>\n", pts,
          colors[k], q ? " stroke-dasharray=\"5,3\"" : "");
      s += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"{}\">{} {}</text>\n", left + 10,
                       top + 16 + 14 * legend++, colors[k], servers[k], q ? "p99 (dashed)" : "p50");
    }
  }
  return s + "</svg>\n";
}

}  // namespace

CLI::App* add_bench_serve(CLI::App& bench, BenchServeOptions& options) {
  CLI::App* cmd = bench.add_subcommand(
      "serve",
      "Load-test weft serve on loopback (closed loop): the checkpoint served in-process with\n"
      "batching on and with --max-batch 1, or a running server (--port); one request per\n"
      "input line. Columns: requests/s, client p50/p95/p99/mean latency, the server's mean\n"
      "latency (srv ms, from /metrics), mean batch size, errors, peak RSS of this process.");
  cmd->add_option("--checkpoint", options.checkpoint, "Checkpoint to serve in-process");
  cmd->add_option("--port", options.port, "Measure the server on 127.0.0.1:PORT instead")
      ->check(CLI::Range(1, 65535));
  cmd->add_option("--model", options.model, "Model name in the URL (default: the checkpoint's)");
  cmd->add_option("--input", options.input,
                  "Instances, one per line (default: ../shared/data/sst/test.txt)");
  cmd->add_option("--concurrency", options.concurrency, "Closed-loop clients")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--requests", options.requests, "Requests per point, at most")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000000));
  cmd->add_option("--seconds", options.seconds, "Seconds per point, at most")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--rounds", options.rounds, "Interleaved rounds")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  cmd->add_option("--max-wait-ms", options.max_wait_ms, "The batched server's --max-wait-ms")
      ->capture_default_str();
  cmd->add_option("--max-batch", options.max_batch, "The batched server's --max-batch")
      ->capture_default_str()
      ->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--threads", options.threads, "Compute threads of the in-process servers")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--format", options.format, "table, csv or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "csv", "json"}));
  cmd->add_option("--out", options.out_file, "Write the rows here (default: stdout)");
  cmd->add_option("--plot", options.plot_file, "Write an SVG plot (latency vs throughput)");
  cmd->add_flag("--decoding", options.decoding,
                "A decoding load served with iteration-level batching and whole-batch: countdown "
                "outputs of 5 and 50 words (a countdown checkpoint is made unless --checkpoint), "
                "or with a tree2seq / seq2tree --checkpoint its own held-out examples (or the "
                "lines of --input), the shorter half of them counted as short");
  cmd->add_option("--device", options.device,
                  "Where the in-process servers run their models (default: as saved)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--decode-width", options.decode_width,
                  "--decoding: the countdown model's width (its step's cost)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  return cmd;
}

namespace {

// The decoding load: countdown outputs of 5 and 50 words (short and long), alternated.
std::vector<std::string> decoding_bodies(std::vector<int>& classes) {
  std::vector<std::string> bodies;
  for (int i = 0; i < 8; ++i) {
    const bool long_output = i % 2 == 1;
    classes.push_back(long_output ? 1 : 0);
    bodies.push_back(
        nlohmann::json{{"instances", {{{"count", long_output ? 50 : 5}, {"word", 1 + i % 8}}}}}
            .dump());
  }
  return bodies;
}

// Requests of one instance each, and their classes: the shorter half of the instances (by
// their text) are short outputs (0), the rest long (1).
std::vector<std::string> bodies_by_size(const std::vector<std::string>& instances,
                                        std::vector<int>& classes) {
  std::vector<std::size_t> sizes;
  for (const std::string& i : instances) sizes.push_back(i.size());
  std::nth_element(sizes.begin(), sizes.begin() + std::ptrdiff_t(sizes.size() / 2), sizes.end());
  const std::size_t median = sizes[sizes.size() / 2];
  std::vector<std::string> bodies;
  for (const std::string& i : instances) {
    classes.push_back(i.size() > median ? 1 : 0);
    bodies.push_back(request_body(i));
  }
  return bodies;
}

// A decoding checkpoint's own held-out examples (tree2seq and seq2tree generate theirs from
// their seed), at most 512, as instances.
std::vector<std::string> held_out_instances(const std::string& checkpoint) {
  const std::unique_ptr<models::Model> model =
      models::load_model(checkpoint, models::ModelUse::kEvaluate, nlohmann::json::object());
  if (model->decoding() == nullptr)
    fail("weft bench serve", "--decoding: '", model->name(),
         "' does not decode (countdown, tree2seq and seq2tree do)");
  const std::span<const nlohmann::json> test = model->examples(train::Split::kTest);
  if (test.empty()) fail("weft bench serve", "--decoding: '", checkpoint, "' has no test split");
  std::vector<std::string> instances;
  for (std::size_t e = 0; e < std::min<std::size_t>(512, test.size()); ++e)
    instances.push_back(test[e].dump());
  return instances;
}

// The decoding load: the countdown's (a running server, or a countdown checkpoint), the lines
// of --input, or the checkpoint's held-out examples.
std::vector<std::string> decoding_load(const BenchServeOptions& options,
                                       std::vector<int>& classes) {
  if (!options.input.empty()) return bodies_by_size(read_lines(options.input), classes);
  if (options.port != 0 || models::read_saved_model(options.checkpoint).name == "countdown")
    return decoding_bodies(classes);
  return bodies_by_size(held_out_instances(options.checkpoint), classes);
}

// A countdown checkpoint in the temporary directory (the model is registered here).
std::string countdown_checkpoint(int width) {
  models::register_countdown_model();
  models::OptionValues o = models::find_model("countdown").default_options();
  o.set("width", width, "--decode-width");
  const std::string path = (std::filesystem::temp_directory_path() /
                            fmt::format("weft_bench_countdown_{}.safetensors", ::getpid()))
                               .string();
  models::save_model(path, *models::create_model(o));
  return path;
}

}  // namespace

int run_bench_serve(const BenchServeOptions& options) {
  check_writable(options.out_file, "output");  // before minutes of measuring, not after
  check_writable(options.plot_file, "plot");
  if (options.decoding && options.checkpoint.empty() && options.port == 0) {
    BenchServeOptions decoding = options;
    decoding.checkpoint = countdown_checkpoint(options.decode_width);
    const int status = run_bench_serve(decoding);
    std::filesystem::remove(decoding.checkpoint);
    return status;
  }
  if (options.checkpoint.empty() == (options.port == 0)) {
    fail("weft bench serve", "give either --checkpoint (in-process servers) or --port");
  }
  set_num_threads(options.threads);
  std::vector<int> classes;
  const std::vector<std::string> bodies =
      options.decoding
          ? decoding_load(options, classes)
          : read_bodies(options.input.empty() ? "../shared/data/sst/test.txt" : options.input);
  std::string model = options.model;
  std::vector<std::pair<std::string, int>> targets;  // (label, port)
  std::vector<std::unique_ptr<serve::Server>> servers;
  std::vector<std::thread> serving;
  if (!options.checkpoint.empty()) {
    if (model.empty()) model = models::read_saved_model(options.checkpoint).name;
    for (const bool batched : {true, false}) {
      serve::ServerOptions o;
      o.port = 0;
      o.models = {{model, options.checkpoint}};
      o.max_batch = batched || options.decoding ? std::size_t(options.max_batch) : 1;
      o.iteration_level = batched;  // decoding models: off is whole-batch decoding
      o.max_wait_ms = options.max_wait_ms;
      o.http_threads = 300;
      if (!options.device.empty()) o.overrides["device"] = options.device;
      servers.push_back(std::make_unique<serve::Server>(o));
      const char* label = options.decoding ? (batched ? "iterative" : "wholebatch")
                                           : (batched ? "batched" : "baseline");
      targets.emplace_back(label, servers.back()->bind());
      serving.emplace_back([s = servers.back().get()] { s->serve(); });
    }
  } else {
    if (model.empty()) fail("weft bench serve", "--port needs --model");
    targets.emplace_back("external", options.port);
  }
  std::vector<Point> points;
  for (int round = 0; round < options.rounds; ++round) {
    for (const int concurrency : options.concurrency) {
      for (const auto& [label, port] : targets) {
        Point p = measure(port, model, bodies, classes, concurrency, options);
        p.server = label;
        p.round = round;
        const std::string row = render({p}, "table");  // without its header line
        std::cerr << row.substr(row.find('\n') + 1) << std::flush;
        points.push_back(p);
      }
    }
  }
  for (auto& s : servers) s->stop();
  for (std::thread& t : serving) t.join();
  const std::string text = render(points, options.format);
  if (options.out_file.empty()) {
    std::cout << text;
  } else {
    write_text(options.out_file, text, "output");
  }
  if (!options.plot_file.empty()) write_text(options.plot_file, svg_plot(points), "plot");
  return 0;
}

}  // namespace weft::tool
