// Raw HTTP requests to `weft serve` — request line, the model's name in the path, headers,
// body, pipelined requests — answered as a connection's are (serve::Server::answer_raw: the
// request framing and limits, then the routes and handlers a worker runs), with a small
// untrained calculator and a decoding model (countdown) served. Every answer must be
// well-formed HTTP whose JSON bodies parse.
//
// An input that starts with the byte 0x01 is drawn: its next byte chooses a Content-Type
// header (or none), a header to send twice (Authorization, Host, Content-Type or the request's
// first header) and whether the bytes go over a real loopback connection that half-closes
// after them (shutdown(SHUT_WR), as nc -N does) instead of answer_raw; the rest is the
// request, the drawn headers put after its request line. A half-closing client must never be
// answered as one that went away.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "fuzz_target.h"
#include "weft/models/countdown.h"
#include "weft/models/registry.h"
#include "weft/models/saved_model.h"
#include "weft/serve/server.h"

using namespace weft;

namespace {

// A small untrained model of `name` saved in `dir`; its path.
std::string saved(const std::string& name, const std::filesystem::path& dir,
                  const nlohmann::json& settings) {
  models::OptionValues options = models::find_model(name).default_options();
  options.update(settings, "fuzz");
  const std::string path = (dir / (name + ".safetensors")).string();
  models::save_model(path, *models::create_model(options));
  return path;
}

// The server, listening on a loopback port too (for the half-closing connections).
serve::Server& server() {
  // Never destroyed: its worker threads outlive every input.
  static serve::Server* const instance = [] {
    models::register_countdown_model();
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("weft_fuzz_serve_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    serve::ServerOptions served;
    served.host = "127.0.0.1";
    served.port = 0;
    served.models = {{"calculator",
                      saved("calculator", dir, {{"hidden", 8}, {"max_train", 4}, {"max_eval", 4}})},
                     {"countdown", saved("countdown", dir, {{"max_count", 64}})}};
    served.max_body_bytes = 65536;
    served.max_instances = 64;
    served.max_depth = 64;
    served.http_threads = 4;
    auto* s = new serve::Server(served);
    s->bind();
    std::thread([s] { s->serve(); }).detach();
    return s;
  }();
  return *instance;
}

// A connection to the server from a loopback address of its own (127.1.x.y in turn, so the
// server's connections waiting out TIME_WAIT never use up the ephemeral ports), or -1.
int connect_to_server() {
  static std::atomic<std::uint32_t> next{0};
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in local{};
  local.sin_family = AF_INET;
  local.sin_addr.s_addr = htonl((127u << 24) | (1u << 16) | (next++ & 0xFFFFu));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(std::uint16_t(server().port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// The bytes sent on a loopback connection that half-closes after them; what comes back until
// the server closes it. Without a connection (the machine's, not the server's, failure), what
// answer_raw gives.
std::string exchange_half_closed(std::string_view bytes) {
  const int fd = connect_to_server();
  if (fd < 0) return server().answer_raw(bytes);
  // libFuzzer's timer interrupts system calls (EINTR): those are retried.
  for (std::string_view left = bytes; !left.empty();) {
    const ssize_t n = ::send(fd, left.data(), left.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the server answered and closed early
    left.remove_prefix(std::size_t(n));
  }
  ::shutdown(fd, SHUT_WR);
  std::string out;
  std::array<char, 65536> buffer;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (std::chrono::steady_clock::now() > deadline) {
      ::close(fd);
      throw std::logic_error("a half-closed connection was never answered nor closed");
    }
    if (::poll(&p, 1, 1000) <= 0) continue;
    const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buffer.data(), std::size_t(n));
  }
  ::close(fd);
  return out;
}

// What an input that starts with 0x01 draws (see the top of the file).
struct Drawn {
  std::string request;
  bool half_close = false;
};

Drawn draw(std::string_view input) {
  if (input.size() < 2 || input[0] != '\x01') return {std::string(input)};
  static constexpr std::array<std::string_view, 8> kTypes = {
      "",
      "application/json",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "text/plain; charset=utf-8",
      "application/json; x=\"%41\"",
      "application/octet-stream",
      "application/x-www-form-urlencoded; charset=latin1"};
  const unsigned flags = static_cast<unsigned char>(input[1]);
  Drawn out{std::string(input.substr(2)), (flags & 0x20) != 0};
  std::string headers;
  if (flags & 7) headers += "Content-Type: " + std::string(kTypes[flags & 7]) + "\r\n";
  const std::size_t line_end = out.request.find("\r\n");
  if (line_end == std::string::npos) return out;
  switch ((flags >> 3) & 3) {
    case 1:
      headers += "Authorization: Bearer a\r\nAuthorization: Bearer b\r\n";
      break;
    case 2:
      headers += "Host: a\r\nHost: b\r\n";
      break;
    case 3: {  // the request's first header, sent twice (or the drawn Content-Type)
      const std::size_t next = out.request.find("\r\n", line_end + 2);
      if (next != std::string::npos && next > line_end + 2)
        headers += out.request.substr(line_end + 2, next - line_end);
      else
        headers += headers;
      break;
    }
    default:
      break;
  }
  out.request.insert(line_end + 2, headers);
  return out;
}

// Whether a predict answer's body says an instance's client went away (the server's own
// message, not a client's bytes it quotes).
bool says_client_gone(const nlohmann::json& body) {
  if (!body.is_object() || !body.contains("errors") || !body["errors"].is_array()) return false;
  for (const nlohmann::json& e : body["errors"]) {
    if (e.is_object() && e.contains("index") && e.contains("error") &&
        e["error"] == "instance " + e["index"].dump() + ": the client went away")
      return true;
  }
  return false;
}

// Checks one response at the front of `bytes` and removes it; throws (a bug) when malformed, or
// with `half_closed` when it answers the client as gone. A response to HEAD has its GET's
// headers, Content-Length included, and no body (RFC 9110 9.3.2): when the input may hold a
// HEAD request, a response whose header end is followed by nothing or by the next response
// counts as one.
void check_response(std::string& bytes, bool may_answer_head, bool half_closed) {
  if (bytes.rfind("HTTP/1.1 ", 0) != 0) throw std::logic_error("a response without a status line");
  if (bytes.rfind("HTTP/1.1 1", 0) == 0) {  // an interim answer: a status line and headers
    const std::size_t end = bytes.find("\r\n\r\n");
    if (end == std::string::npos) throw std::logic_error("an interim answer without its end");
    bytes.erase(0, end + 4);
    return;
  }
  const std::size_t head_end = bytes.find("\r\n\r\n");
  if (head_end == std::string::npos) throw std::logic_error("a response without a header end");
  const std::string head = bytes.substr(0, head_end + 2);
  const std::size_t length_at = head.find("Content-Length: ");
  const std::size_t length =
      length_at == std::string::npos ? 0 : std::stoul(head.substr(length_at + 16));
  const bool bodiless = may_answer_head && (bytes.size() == head_end + 4 ||
                                            bytes.compare(head_end + 4, 9, "HTTP/1.1 ") == 0);
  if (bodiless) {
    bytes.erase(0, head_end + 4);
    return;
  }
  if (head_end + 4 + length > bytes.size()) throw std::logic_error("a response cut short");
  const std::string body = bytes.substr(head_end + 4, length);
  if (head.find("Content-Type: application/json") != std::string::npos) {
    // A non-weft exception, so a bug, when the body is not JSON.
    const nlohmann::json parsed = nlohmann::json::parse(body);
    if (half_closed && says_client_gone(parsed))
      throw std::logic_error("a half-closing client was answered as one that went away");
  }
  bytes.erase(0, head_end + 4 + length);
}

}  // namespace

WEFT_FUZZ_TARGET(serve_request) {
  const Drawn drawn = draw(input);
  std::string responses =
      drawn.half_close ? exchange_half_closed(drawn.request) : server().answer_raw(drawn.request);
  const bool may_answer_head = drawn.request.find("HEAD") != std::string::npos;
  while (!responses.empty()) check_response(responses, may_answer_head, drawn.half_close);
}
