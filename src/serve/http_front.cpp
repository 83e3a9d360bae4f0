// The server's connections (http_front.h): the event loop that reads requests under deadlines,
// the workers that answer whole requests through cpp-httplib's request processing, and the
// in-memory stream between the two.
#include "http_front.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace weft::serve::detail {

namespace {

using Clock = std::chrono::steady_clock;

// The accepting thread hands each socket straight to the event loop (process_and_close_socket
// returns at once), so cpp-httplib's task queue runs its tasks where they are queued.
class RunAtOnce : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

// One request's bytes in, the response's bytes out: what process_request reads and writes.
class BufferStream final : public httplib::Stream {
 public:
  BufferStream(const std::string& in, int fd) : in_(in), fd_(fd) {}
  bool is_readable() const override { return true; }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    const std::size_t n = std::min(size, in_.size() - at_);
    std::memcpy(ptr, in_.data() + at_, n);
    at_ += n;
    return ssize_t(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    out.append(ptr, size);
    return ssize_t(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address(::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address(::getsockname, ip, port);
  }
  socket_t socket() const override { return fd_; }

  std::string out;

 private:
  template <typename Query>
  void address(Query query, std::string& ip, int& port) const {
    sockaddr_storage storage{};
    socklen_t length = sizeof(storage);
    ip.clear();
    port = 0;
    if (fd_ < 0 || query(fd_, reinterpret_cast<sockaddr*>(&storage), &length) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (storage.ss_family == AF_INET) {
      const auto* a = reinterpret_cast<const sockaddr_in*>(&storage);
      ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
      port = ntohs(a->sin_port);
    } else if (storage.ss_family == AF_INET6) {
      const auto* a = reinterpret_cast<const sockaddr_in6*>(&storage);
      ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
      port = ntohs(a->sin6_port);
    }
    ip = text;
  }

  const std::string& in_;
  std::size_t at_ = 0;
  int fd_;
};

const char* reason(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 431:
      return "Request Header Fields Too Large";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

// Sends all of `data` on a non-blocking socket within `timeout_s` in all.
bool send_all(int fd, std::string_view data, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(std::size_t(n));
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLOUT, 0};
    ::poll(&p, 1, int(left.count()));
  }
  return true;
}

}  // namespace

// What the reader forwards must be what cpp-httplib reads.
static_assert(RequestLimits{}.max_header_line_bytes + 2 <= CPPHTTPLIB_HEADER_MAX_LENGTH);

std::string error_response(int status, const std::string& message) {
  const std::string body = nlohmann::json{{"error", message}}.dump(
                               -1, ' ', false, nlohmann::json::error_handler_t::replace) +
                           "\n";
  // The front answers 405 only for a method no path answers (RequestReader).
  const std::string allow = status == 405 ? fmt::format("Allow: {}\r\n", kAllowedMethods) : "";
  return fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
      "{}Connection: close\r\n\r\n{}",
      status, reason(status), body.size(), allow, body);
}

struct HttpServer::Connection {
  Connection(int descriptor, RequestLimits limits) : fd(descriptor), reader(limits) {}
  const int fd;
  std::string in;  // read, not yet consumed by the reader
  RequestReader reader;
  Phase phase = Phase::kIdle;
  Clock::time_point deadline;
  std::size_t served = 0;
  bool sent_continue = false;
};

HttpServer::HttpServer(ConnectionLimits limits) : limits_(limits) {
  new_task_queue = [] { return new RunAtOnce; };
}

HttpServer::~HttpServer() {
  if (loop_thread_.joinable()) drain();
}

void HttpServer::start_connections() {
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = wake_;
  ::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &event);
  workers_ = std::make_unique<httplib::ThreadPool>(std::size_t(std::max(1, limits_.workers)));
  last_sweep_ = Clock::now();
  loop_thread_ = std::thread([this] { loop(); });
}

void HttpServer::stop_listening() {
  const socket_t sock = svr_sock_.exchange(INVALID_SOCKET);
  if (sock == INVALID_SOCKET) return;
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
}

void HttpServer::drain() {
  stopping_ = true;
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto n = ::write(wake_, &one, sizeof(one));
  if (loop_thread_.joinable()) loop_thread_.join();
  if (workers_) workers_->shutdown();  // every request that arrived whole is answered
  workers_.reset();
  for (const ConnectionPtr& c : handed_) close_connection(c->fd);
  handed_.clear();
  ::close(epoll_);
  ::close(wake_);
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  if (stopping_ || open_ >= limits_.max_connections) {
    count_answer(503);
    const std::string refusal = error_response(503, "too many open connections; retry later");
    [[maybe_unused]] const auto n =
        ::send(sock, refusal.data(), refusal.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::close(sock);
    return true;
  }
  ::fcntl(sock, F_SETFL, ::fcntl(sock, F_GETFL) | O_NONBLOCK);
  ++open_;
  auto c = std::make_shared<Connection>(sock, limits_.request);
  set_phase(*c, Phase::kIdle);
  hand_back(std::move(c));
  return true;
}

void HttpServer::hand_back(ConnectionPtr c) {
  {
    std::lock_guard<std::mutex> lock(handed_mutex_);
    handed_.push_back(std::move(c));
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto n = ::write(wake_, &one, sizeof(one));
}

void HttpServer::loop() {
  std::vector<epoll_event> events(256);
  while (!stopping_) {
    const int n = ::epoll_wait(epoll_, events.data(), int(events.size()), 50);
    for (int i = 0; i < n; ++i) {
      const int fd = events[std::size_t(i)].data.fd;
      if (fd == wake_) {
        std::uint64_t count = 0;
        [[maybe_unused]] const auto r = ::read(wake_, &count, sizeof(count));
        adopt_handed_back();
        continue;
      }
      const auto it = connections_.find(fd);
      if (it == connections_.end()) continue;
      const ConnectionPtr c = it->second;  // a copy: advance may erase the map's
      on_readable(c);
    }
    if (Clock::now() - last_sweep_ > std::chrono::milliseconds(100)) sweep_deadlines();
  }
  std::vector<int> open;
  for (const auto& [fd, c] : connections_) open.push_back(fd);
  for (const int fd : open) {
    connections_.erase(fd);
    close_connection(fd);
  }
}

void HttpServer::adopt_handed_back() {
  std::deque<ConnectionPtr> batch;
  {
    std::lock_guard<std::mutex> lock(handed_mutex_);
    batch.swap(handed_);
  }
  for (ConnectionPtr& c : batch) {
    connections_[c->fd] = c;
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = c->fd;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, c->fd, &event);
    if (!c->in.empty()) advance(c);  // a pipelined request is already here
  }
}

void HttpServer::on_readable(const ConnectionPtr& c) {
  char buffer[65536];
  const ssize_t n = ::recv(c->fd, buffer, sizeof(buffer), 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) {  // the client closed, or the connection failed
    connections_.erase(c->fd);
    close_connection(c->fd);
    return;
  }
  if (c->phase == Phase::kClosing) return;  // what a refused request still sends is dropped
  c->in.append(buffer, std::size_t(n));
  advance(c);
}

void HttpServer::advance(const ConnectionPtr& c) {
  const RequestReader::Step step = c->reader.read(c->in);
  if (step == RequestReader::Step::kRefused) {
    return refuse(c, c->reader.status(), c->reader.error());
  }
  if (step == RequestReader::Step::kNeedMore) {
    if (c->reader.in_body()) {
      if (c->phase != Phase::kBody) set_phase(*c, Phase::kBody);
      if (c->reader.expects_continue() && !c->sent_continue) {
        c->sent_continue = true;
        static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        [[maybe_unused]] const auto n =
            ::send(c->fd, kContinue.data(), kContinue.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
    } else if (c->reader.started() && c->phase == Phase::kIdle) {
      set_phase(*c, Phase::kHead);
    }
    return;
  }
  ::epoll_ctl(epoll_, EPOLL_CTL_DEL, c->fd, nullptr);
  connections_.erase(c->fd);
  workers_->enqueue([this, c] { serve_request(c); });
}

void HttpServer::set_phase(Connection& c, Phase phase) {
  const double seconds = phase == Phase::kIdle   ? limits_.idle_timeout_s
                         : phase == Phase::kHead ? limits_.header_timeout_s
                         : phase == Phase::kBody ? limits_.body_timeout_s
                                                 : 2.0;  // closing: time for the answer to leave
  c.phase = phase;
  c.deadline = Clock::now() +
               std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// The answer goes out, then the connection only drains what the client still sends: closing it
// with unread bytes would reset it, and the client might never read why.
void HttpServer::refuse(const ConnectionPtr& c, int status, const std::string& message) {
  count_answer(status);
  const std::string response = error_response(status, message);
  [[maybe_unused]] const auto n =
      ::send(c->fd, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(c->fd, SHUT_WR);
  c->in.clear();
  set_phase(*c, Phase::kClosing);
}

void HttpServer::sweep_deadlines() {
  const auto now = last_sweep_ = Clock::now();
  std::vector<ConnectionPtr> expired;
  for (const auto& [fd, c] : connections_) {
    if (now >= c->deadline) expired.push_back(c);
  }
  for (const ConnectionPtr& c : expired) {
    if (c->phase == Phase::kHead || c->phase == Phase::kBody) {
      const double limit =
          c->phase == Phase::kHead ? limits_.header_timeout_s : limits_.body_timeout_s;
      refuse(c, 408,
             fmt::format("the request's {} did not arrive within {} s",
                         c->phase == Phase::kHead ? "headers" : "body", limit));
    } else {
      connections_.erase(c->fd);
      close_connection(c->fd);
    }
  }
}

void HttpServer::serve_request(const ConnectionPtr& c) {
  const std::string request = c->reader.take();
  const bool last = ++c->served >= limits_.max_requests_per_connection || stopping_;
  bool closed = false;
  const std::string response = answer(request, c->fd, last, closed);
  if (!send_all(c->fd, response, limits_.write_timeout_s) || closed || last || stopping_) {
    close_connection(c->fd);
    return;
  }
  c->sent_continue = false;
  set_phase(*c, Phase::kIdle);
  hand_back(c);
}

namespace {
thread_local int answering_fd = -1;  // set by answer() for its handler, on its own thread
}  // namespace

int HttpServer::answering_socket() { return answering_fd; }

std::string HttpServer::answer(const std::string& request, int fd, bool close_connection,
                               bool& closed) {
  BufferStream stream(request, fd);
  answering_fd = fd;
  struct Reset {
    ~Reset() { answering_fd = -1; }
  } reset;
  try {
    process_request(stream, close_connection, closed, nullptr);
  } catch (const std::exception& e) {
    closed = true;
    return error_response(500, e.what());
  }
  return std::move(stream.out);
}

std::string HttpServer::answer_raw(std::string_view bytes) {
  RequestReader reader(limits_.request);
  std::string in(bytes), out;
  for (int requests = 0; requests < 16; ++requests) {
    const RequestReader::Step step = reader.read(in);
    if (step == RequestReader::Step::kRefused)
      return out + error_response(reader.status(), reader.error());
    if (step == RequestReader::Step::kNeedMore) break;  // a connection would wait for more
    bool closed = false;
    out += answer(reader.take(), -1, false, closed);
    if (closed) break;
  }
  return out;
}

void HttpServer::close_connection(int fd) {
  ::close(fd);
  --open_;
}

void HttpServer::count_answer(int status) {
  if (status >= 0 && status < int(front_answers_.size())) ++front_answers_[std::size_t(status)];
}

std::uint64_t HttpServer::front_answers(int status) const {
  if (status < 0 || status >= int(front_answers_.size())) return 0;
  return front_answers_[std::size_t(status)].load();
}

}  // namespace weft::serve::detail
