// The loopback-only HTTP client of the tests and the load generator (cpp-httplib underneath).
#include "weft/serve/client.h"

#include <httplib.h>

#include "weft/core/error.h"

namespace weft::serve {

struct HttpClient::Impl {
  Impl(const std::string& host, int port) : client(host, port) {}
  httplib::Client client;
};

HttpClient::HttpClient(const std::string& host, int port, double timeout_seconds) {
  if (host != "127.0.0.1" && host != "localhost" && host != "::1") {
    fail("http client", "refusing '", host, "': only loopback (127.0.0.1, ::1, localhost)");
  }
  impl_ = std::make_unique<Impl>(host, port);
  const auto timeout = std::chrono::duration<double>(timeout_seconds);
  impl_->client.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  impl_->client.set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  impl_->client.set_keep_alive(true);
  impl_->client.set_tcp_nodelay(true);
}

HttpClient::~HttpClient() = default;

namespace {
HttpResult convert(const httplib::Result& r) {
  HttpResult out;
  if (!r) {
    out.error = httplib::to_string(r.error());
    return out;
  }
  out.status = r->status;
  out.body = r->body;
  out.retry_after = r->get_header_value("Retry-After");
  return out;
}
}  // namespace

// A keep-alive connection the server has just closed fails on first use ("Read"); such a
// transport error is retried once on a fresh connection.
HttpResult HttpClient::get(const std::string& path) {
  HttpResult r = convert(impl_->client.Get(path));
  if (r.status == 0) r = convert(impl_->client.Get(path));
  return r;
}

HttpResult HttpClient::post(const std::string& path, const std::string& body,
                            const std::string& content_type) {
  HttpResult r = convert(impl_->client.Post(path, body, content_type));
  if (r.status == 0) r = convert(impl_->client.Post(path, body, content_type));
  return r;
}

}  // namespace weft::serve
