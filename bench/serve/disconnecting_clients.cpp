// Resident memory of a decoding `weft serve` over a long run of clients that go away mid-decode
// (issue 33: "RSS flat over a long run with disconnecting clients"). It serves a countdown
// checkpoint in-process (loopback only); --clients threads each send a long request (greedy or
// a beam of 2), wait a few milliseconds and close the connection, while --finishers threads
// post short requests that complete. Once a second it prints the process's RSS and the
// server's decoding figures (live sequences, generations, tape nodes, cancelled, answered),
// the heap malloc has handed out (mallinfo2) and the tensor pool's bytes (live, cached), which
// tell a leak from freed memory kept for reuse.
//   weft_bench_serve_disconnect --seconds 180 --clients 24 --finishers 4
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

// Sends a predict request on a fresh connection, holds it `hold_ms` and closes it.
void send_and_leave(int port, const std::string& body, int hold_ms) {
  const int fd = weft::bench::open_loopback_connection(port);
  if (fd < 0) return;
  const std::string request = fmt::format(
      "POST /v1/models/countdown:predict HTTP/1.1\r\nHost: x\r\nContent-Type: "
      "application/json\r\nContent-Length: {}\r\n\r\n{}",
      body.size(), body);
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
  ::close(fd);
}

std::string countdown_checkpoint() {
  weft::models::register_countdown_model();
  weft::models::OptionValues o = weft::models::find_model("countdown").default_options();
  o.update({{"width", 256}, {"max_count", 100000}}, "disconnecting clients");
  const std::string path = (std::filesystem::temp_directory_path() /
                            fmt::format("weft_disconnect_{}.safetensors", ::getpid()))
                               .string();
  weft::models::save_model(path, *weft::models::create_model(o));
  return path;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("RSS of a decoding server under clients that go away mid-decode");
  double seconds = 180;
  int clients = 24, finishers = 4;
  app.add_option("--seconds", seconds, "How long to run")->capture_default_str();
  app.add_option("--clients", clients, "Threads whose requests go away mid-decode")
      ->capture_default_str();
  app.add_option("--finishers", finishers, "Threads whose short requests complete")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  weft::set_num_threads(1);
  const std::string path = countdown_checkpoint();
  weft::serve::ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.http_threads = clients + finishers + 8;
  options.models.push_back({"countdown", path});
  weft::serve::Server server(options);
  const int port = server.bind();
  std::thread serving([&] { server.serve(); });
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      weft::Rng rng(std::uint64_t(c) + 1);
      while (!done) {
        const json body = {{"instances", {{{"count", 2000 + rng.below(50000)}, {"word", 2}}}},
                           {"beam", int(rng.below(2)) * 2}};
        send_and_leave(port, body.dump(), 2 + int(rng.below(30)));
      }
    });
  for (int f = 0; f < finishers; ++f)
    threads.emplace_back([&] {
      weft::serve::HttpClient client("127.0.0.1", port);
      while (!done)
        client.post("/v1/models/countdown:predict", R"({"instances": [{"count": 20}]})");
    });
  std::cout << "seconds,rss_mb,heap_in_use_mb,tensor_mb,tensor_cached_mb,live,generations,"
               "tape_nodes,cancelled,answered\n";
  const auto start = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const std::string m = server.metrics_text();
    const weft::AllocatorStats tensors = weft::allocator_stats();
    std::cout << fmt::format(
                     "{:.0f},{:.1f},{:.1f},{:.1f},{:.1f},{},{},{},{},{}\n",
                     std::chrono::duration<double>(Clock::now() - start).count(), rss_mb(),
                     heap_in_use_mb(), double(tensors.bytes_in_use) / (1024.0 * 1024.0),
                     double(tensors.bytes_cached) / (1024.0 * 1024.0),
                     metric(m, "weft_decode_live_sequences"), metric(m, "weft_decode_generations"),
                     metric(m, "weft_decode_tape_nodes"), metric(m, "weft_decode_cancelled_total"),
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
