// The connection side of the server: cpp-httplib's Server (routes, handlers, responses) with its
// thread-per-connection socket handling replaced. One event loop (epoll) owns every open
// connection and reads requests off them (request_reader.h) under total deadlines; a request
// reaches a worker thread only once it has wholly arrived, so idle or slow clients cost a file
// descriptor and a buffer, never a thread. Keep-alive connections go back to the loop with any
// pipelined bytes they carried.
#pragma once

#include <httplib.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "request_reader.h"

namespace weft::serve::detail {

struct ConnectionLimits {
  RequestLimits request;
  double header_timeout_s = 10;  // from a request's first byte to the end of its headers
  double body_timeout_s = 30;    // from the end of the headers to the end of the body
  double idle_timeout_s = 5;     // a keep-alive connection waiting for its next request
  double write_timeout_s = 10;   // to send one response
  std::size_t max_connections = 8192;
  std::size_t max_requests_per_connection = 10000;
  int workers = 300;  // requests answered at once
};

// A complete error response (JSON body, Connection: close) for what the front answers itself.
std::string error_response(int status, const std::string& message);

class HttpServer : public httplib::Server {
 public:
  explicit HttpServer(ConnectionLimits limits);
  ~HttpServer() override;
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Closes the listening socket, so listen returns (or never starts): httplib's stop() does
  // nothing until listen has begun, and a stop just before it would be lost.
  void stop_listening();
  // Starts the event loop and the workers; call before listen_after_bind.
  void start_connections();
  // After listen returns: answers the requests that arrived whole, closes every connection.
  void drain();
  // The bytes answering one normalized request (RequestReader::take), as a worker sends them.
  std::string answer(const std::string& request, int fd, bool close_connection, bool& closed);
  // Raw request bytes answered as a connection's (framing, limits, pipelining) without a socket.
  std::string answer_raw(std::string_view bytes);
  const ConnectionLimits& limits() const { return limits_; }
  // Answers the front gave itself, by status (408, 413, 431, 503 ...), and connections open.
  std::uint64_t front_answers(int status) const;
  std::size_t open_connections() const { return open_; }
  void count_answer(int status);
  int listening_socket() const { return svr_sock_.load(); }
  // The connection whose request the calling thread is answering (-1 outside a handler, or
  // without a socket): a long request watches it to notice a client that went away.
  static int answering_socket();

 private:
  struct Connection;
  using ConnectionPtr = std::shared_ptr<Connection>;
  enum class Phase { kIdle, kHead, kBody, kClosing };

  bool process_and_close_socket(socket_t sock) override;  // on the accepting thread
  void loop();
  void adopt_handed_back();
  void on_readable(const ConnectionPtr& c);
  void advance(const ConnectionPtr& c);
  void set_phase(Connection& c, Phase phase);
  void refuse(const ConnectionPtr& c, int status, const std::string& message);
  void sweep_deadlines();
  void serve_request(const ConnectionPtr& c);
  void hand_back(ConnectionPtr c);
  void close_connection(int fd);

  const ConnectionLimits limits_;
  int epoll_ = -1, wake_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> open_{0};
  std::unordered_map<int, ConnectionPtr> connections_;  // the loop's, not in a worker's hands
  std::mutex handed_mutex_;
  std::deque<ConnectionPtr> handed_;  // new or kept-alive connections for the loop
  std::unique_ptr<httplib::ThreadPool> workers_;
  std::thread loop_thread_;
  std::chrono::steady_clock::time_point last_sweep_;
  std::array<std::atomic<std::uint64_t>, 600> front_answers_{};
};

}  // namespace weft::serve::detail
