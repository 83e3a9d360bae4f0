// A small HTTP/1.1 client for loopback only (the tests and `weft bench serve`): one keep-alive
// connection per client object, used from one thread at a time. It refuses any host other than
// 127.0.0.1, ::1 or localhost, so a load generator can never be pointed at another machine.
#pragma once

#include <memory>
#include <string>

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft::serve {

struct HttpResult {
  int status = 0;  // 0: no response (error says why)
  std::string body;
  std::string retry_after;  // the Retry-After header, when present
  std::string error;
};

class HttpClient {
 public:
  HttpClient(const std::string& host, int port, double timeout_seconds = 60);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  HttpResult get(const std::string& path);
  HttpResult post(const std::string& path, const std::string& body,
                  const std::string& content_type = "application/json");

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::serve
WEFT_API_END
