// Resident memory of a decoding `weft serve` over a long run of clients that go away mid-decode
// (issue 33: "RSS flat over a long run with disconnecting clients"; issue 41: the decoding
// path with beams, many instances a request). It serves a decoding model in-process (loopback
// only): a countdown checkpoint, or an untrained tree2seq or seq2tree (--model); --clients
// threads each send a request of --instances instances (greedy, or a beam of 2 or 4 with
// --beams), wait 0 to --hold-ms milliseconds and close the connection, while --finishers
// threads post one-instance requests that complete. Once a second it prints the process's RSS
// and the server's decoding figures (live sequences, queued instances, generations, tape nodes,
// cancelled, dropped before encoding, answered), the heap malloc has handed out (mallinfo2)
// and the tensor pool's bytes (live, cached), which tell a leak from freed memory kept for
// reuse.
//   weft_bench_serve_disconnect --seconds 180 --clients 24 --finishers 4
//   weft_bench_serve_disconnect --model tree2seq --clients 100 --instances 32 --hold-ms 50
//     --beams --seconds 600    (one command)
#include <malloc.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "loopback.h"
#include "weft/backend/cpu.h"
#include "weft/core/rng.h"
#include "weft/models/calculator_data.h"
#include "weft/models/countdown.h"
#include "weft/models/registry.h"
#include "weft/models/saved_model.h"
#include "weft/serve/client.h"
#include "weft/serve/server.h"
#include "weft/tensor/allocator.h"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double rss_mb() {
  std::ifstream statm("/proc/self/statm");
  double pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * double(::sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

// Bytes malloc has handed out and not had back (every arena, mmapped blocks too), in MB: what
// the process holds, where RSS also counts freed memory malloc keeps for reuse.
double heap_in_use_mb() {
  const struct mallinfo2 info = ::mallinfo2();
  return double(info.uordblks + info.hblkhd) / (1024.0 * 1024.0);
}

double metric(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name + "{", 0) == 0) return std::stod(line.substr(line.rfind(' ') + 1));
  return 0;
}

// Sends a predict request for `model` on a fresh connection, holds it `hold_ms` and closes it.
void send_and_leave(int port, const std::string& model, const std::string& body, int hold_ms) {
  const int fd = weft::bench::open_loopback_connection(port);
  if (fd < 0) return;
  const std::string request = fmt::format(
      "POST /v1/models/{}:predict HTTP/1.1\r\nHost: x\r\nContent-Type: "
      "application/json\r\nContent-Length: {}\r\n\r\n{}",
      model, body.size(), body);
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
  ::close(fd);
}

// A checkpoint of `model`: countdown (long outputs, a wide state), or an untrained tree2seq or
// seq2tree (its outputs run to their bounds as often as not).
std::string checkpoint(const std::string& model) {
  weft::models::register_countdown_model();
  weft::models::OptionValues o = weft::models::find_model(model).default_options();
  if (model == "countdown") {
    o.update({{"width", 256}, {"max_count", 100000}}, "disconnecting clients");
  } else {
    o.update({{"max_train", 8}, {"max_eval", 8}}, "disconnecting clients");
  }
  const std::string path = (std::filesystem::temp_directory_path() /
                            fmt::format("weft_disconnect_{}_{}.safetensors", model, ::getpid()))
                               .string();
  weft::models::save_model(path, *weft::models::create_model(o));
  return path;
}

// One instance of `model`: a long countdown, or a random expression (as a tree or as text).
json instance(const std::string& model, weft::Rng& rng, bool long_one) {
  if (model == "countdown")
    return {{"count", long_one ? 2000 + rng.below(50000) : 20}, {"word", 2}};
  const json expression = weft::models::make_calculator_examples(1, rng)[0].expression;
  return model == "tree2seq" ? expression : json(weft::models::expression_text(expression));
}

// A request of `instances` instances; with `beams`, a beam of 0, 2 or 4 at random, else 0 or 2.
std::string request_body(const std::string& model, weft::Rng& rng, int instances, bool beams) {
  json list = json::array();
  for (int i = 0; i < instances; ++i) list.push_back(instance(model, rng, true));
  const int beam = beams ? 2 * int(rng.below(3)) : 2 * int(rng.below(2));
  return json{{"instances", list}, {"beam", beam}}.dump();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("RSS of a decoding server under clients that go away mid-decode");
  double seconds = 180;
  int clients = 24, finishers = 4, instances = 1, hold_ms = 31;
  bool beams = false;
  std::string model = "countdown";
  app.add_option("--seconds", seconds, "How long to run")->capture_default_str();
  app.add_option("--clients", clients, "Threads whose requests go away mid-decode")
      ->capture_default_str();
  app.add_option("--finishers", finishers, "Threads whose short requests complete")
      ->capture_default_str();
  app.add_option("--model", model, "countdown, tree2seq or seq2tree")
      ->check(CLI::IsMember({"countdown", "tree2seq", "seq2tree"}))
      ->capture_default_str();
  app.add_option("--instances", instances, "Instances in each going-away request")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--hold-ms", hold_ms, "A going-away client closes after 0 to this many ms")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  app.add_flag("--beams", beams, "Beams of 0, 2 or 4 (else 0 or 2)");
  CLI11_PARSE(app, argc, argv);
  weft::set_num_threads(1);
  const std::string path = checkpoint(model);
  weft::serve::ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.http_threads = clients + finishers + 8;
  options.models.push_back({model, path});
  weft::serve::Server server(options);
  const int port = server.bind();
  std::thread serving([&] { server.serve(); });
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      weft::Rng rng(std::uint64_t(c) + 1);
      while (!done) {
        const std::string body = request_body(model, rng, instances, beams);
        send_and_leave(port, model, body, int(rng.below(std::uint64_t(hold_ms) + 1)));
      }
    });
  for (int f = 0; f < finishers; ++f)
    threads.emplace_back([&, f] {
      weft::Rng rng(std::uint64_t(1000 + f));
      weft::serve::HttpClient client("127.0.0.1", port);
      while (!done)
        client.post("/v1/models/" + model + ":predict",
                    json{{"instances", {instance(model, rng, false)}}}.dump());
    });
  std::cout << "seconds,rss_mb,heap_in_use_mb,tensor_mb,tensor_cached_mb,live,queued,generations,"
               "tape_nodes,cancelled,dropped,answered\n";
  const auto start = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const std::string m = server.metrics_text();
    const weft::AllocatorStats tensors = weft::allocator_stats();
    std::cout << fmt::format("{:.0f},{:.1f},{:.1f},{:.1f},{:.1f},{},{},{},{},{},{},{}\n",
                             std::chrono::duration<double>(Clock::now() - start).count(), rss_mb(),
                             heap_in_use_mb(), double(tensors.bytes_in_use) / (1024.0 * 1024.0),
                             double(tensors.bytes_cached) / (1024.0 * 1024.0),
                             metric(m, "weft_decode_live_sequences"), metric(m, "weft_queue_depth"),
                             metric(m, "weft_decode_generations"),
                             metric(m, "weft_decode_tape_nodes"),
                             metric(m, "weft_decode_cancelled_total"),
                             metric(m, "weft_decode_dropped_total"),
                             metric(m, "weft_decode_sequences_total"))
              << std::flush;
  }
  done = true;
  for (std::thread& t : threads) t.join();
  server.stop();
  serving.join();
  std::filesystem::remove(path);
  return 0;
}
