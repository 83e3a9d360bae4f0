// A normal client's latency while hostile clients hold connections to a running `weft serve`
// (loopback only, bounded in time): --dribblers connections each sending one header byte every
// --dribble-s seconds, and --idle connections sending nothing; either is reopened as soon as the
// server drops it, so the hostile count stays constant. Meanwhile one keep-alive client posts a
// predict request every --interval-ms and records each latency (or its failure).
//   weft_bench_serve_hostile --port 8080 --model calculator --instance '{"number": 3}'
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "loopback.h"
#include "weft/serve/client.h"

namespace {

using Clock = std::chrono::steady_clock;

int open_connection(int port) { return weft::bench::open_loopback_connection(port); }

// Whether the server has closed `fd` (what it sent before is read and dropped).
bool dropped(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  char buffer[4096];
  return ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT) <= 0;
}

struct Hostile {
  std::vector<int> fds;
  std::vector<std::size_t> sent;  // header bytes each dribbler has sent
  std::atomic<std::uint64_t> reopened{0};
};

void harass(Hostile& h, int port, std::size_t dribblers, double dribble_s,
            const std::atomic<bool>& done) {
  const std::string header = "POST /v1/models/x:predict HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ";
  while (!done) {
    const auto next = Clock::now() + std::chrono::duration<double>(dribble_s);
    for (std::size_t i = 0; i < h.fds.size() && !done; ++i) {
      if (h.fds[i] < 0 || dropped(h.fds[i])) {
        if (h.fds[i] >= 0) ::close(h.fds[i]);
        h.fds[i] = open_connection(port);
        h.sent[i] = 0;
        ++h.reopened;
      }
      if (i < dribblers && h.fds[i] >= 0) {
        const char byte = h.sent[i] < header.size() ? header[h.sent[i]] : 'a';
        ::send(h.fds[i], &byte, 1, MSG_NOSIGNAL);
        ++h.sent[i];
      }
    }
    while (!done && Clock::now() < next) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("A normal client's latency beside hostile connections to weft serve (loopback)");
  int port = 8080;
  std::string model = "calculator", instance = R"({"number": 3})";
  std::size_t dribblers = 1000, idle = 1000;
  double dribble_s = 2, seconds = 30, interval_ms = 50, timeout_s = 10;
  app.add_option("--port", port)->required();
  app.add_option("--model", model)->capture_default_str();
  app.add_option("--instance", instance, "One instance (JSON)")->capture_default_str();
  app.add_option("--dribblers", dribblers)->capture_default_str();
  app.add_option("--idle", idle)->capture_default_str();
  app.add_option("--dribble-s", dribble_s)->capture_default_str();
  app.add_option("--seconds", seconds, "How long the normal client runs")->capture_default_str();
  app.add_option("--interval-ms", interval_ms)->capture_default_str();
  app.add_option("--timeout-s", timeout_s, "The normal client's timeout")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  Hostile hostile;
  hostile.fds.resize(dribblers + idle, -1);
  hostile.sent.resize(dribblers + idle, 0);
  for (int& fd : hostile.fds) fd = open_connection(port);
  std::atomic<bool> done{false};
  std::thread harasser([&] { harass(hostile, port, dribblers, dribble_s, done); });
  std::this_thread::sleep_for(std::chrono::duration<double>(dribble_s * 2));  // all dribbling

  const std::string body = nlohmann::json{{"instances", {nlohmann::json::parse(instance)}}}.dump();
  const std::string path = "/v1/models/" + model + ":predict";
  std::vector<double> latencies;
  int failures = 0;
  weft::serve::HttpClient client("127.0.0.1", port, timeout_s);
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    const auto start = Clock::now();
    const weft::serve::HttpResult r = client.post(path, body);
    latencies.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    if (r.status != 200) ++failures;
    std::this_thread::sleep_until(start + std::chrono::duration<double>(interval_ms / 1000));
  }
  std::size_t open = 0;
  for (const int fd : hostile.fds) open += fd >= 0 && !dropped(fd);
  done = true;
  harasser.join();
  std::sort(latencies.begin(), latencies.end());
  auto quantile = [&](double q) {
    return latencies.empty() ? 0.0 : latencies[std::size_t(q * double(latencies.size() - 1))];
  };
  std::cout << fmt::format(
      "requests {} failed {} p50 {:.4f} s p99 {:.4f} s max {:.4f} s | hostile {} dribbling + {} "
      "idle, {} open at the end, {} reopened after the server dropped them\n",
      latencies.size(), failures, quantile(0.5), quantile(0.99),
      latencies.empty() ? 0.0 : latencies.back(), dribblers, idle, open, hostile.reopened.load());
  for (const int fd : hostile.fds) {
    if (fd >= 0) ::close(fd);
  }
  return 0;
}
