// What the server tests share: a loopback connection driven byte by byte (what an HTTP client
// library will not send), and the loopback server a test starts.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include "weft/serve/server.h"

namespace weft::testing {

// One loopback connection driven byte by byte, for what an HTTP client library will not send
// (broken framing, pipelining, a dribble of bytes).
class RawConnection {
 public:
  explicit RawConnection(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(std::uint16_t(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      throw std::runtime_error("cannot connect to the test server");
    }
  }
  ~RawConnection() { ::close(fd_); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  // Errors are ignored: the server may rightly have answered and closed already.
  void send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      bytes.remove_prefix(std::size_t(n));
    }
  }
  // What the server sends until it closes the connection (closed() then says so) or until
  // `seconds` pass: a bound that tells "answered" from "hung", never a timing measurement.
  std::string read_until_closed(double seconds = 20) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    char buffer[65536];
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, int(left.count())) <= 0) return out;
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) {
        closed_ = true;
        return out;
      }
      out.append(buffer, std::size_t(n));
    }
  }
  // The first bytes the server sends within `seconds` (empty if none).
  std::string read_some(double seconds = 20) {
    pollfd p{fd_, POLLIN, 0};
    char buffer[4096];
    if (::poll(&p, 1, int(seconds * 1000)) <= 0) return "";
    const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
    return n > 0 ? std::string(buffer, std::size_t(n)) : "";
  }
  bool closed() const { return closed_; }
  // Sends FIN but keeps reading (shutdown(SHUT_WR), as nc -N and socat do).
  void half_close() { ::shutdown(fd_, SHUT_WR); }

 private:
  int fd_;
  bool closed_ = false;
};

// A server on an ephemeral loopback port, serving on its own thread until stop() (or the end).
class LoopbackServer {
 public:
  explicit LoopbackServer(serve::ServerOptions options) {
    options.host = "127.0.0.1";
    options.port = 0;
    server_ = std::make_unique<serve::Server>(std::move(options));
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->serve(); });
  }
  ~LoopbackServer() { stop(); }
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;
  void stop() {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return port_; }
  serve::Server& server() { return *server_; }

 private:
  std::unique_ptr<serve::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace weft::testing
