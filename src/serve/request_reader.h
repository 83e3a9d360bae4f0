// Reads one HTTP/1.1 request off a connection's bytes as they arrive, enforcing the server's
// framing limits before anything is buffered: the request line and headers (sizes, syntax,
// no control characters, one Authorization and one Host, methods), Content-Length (digits
// only), a chunked body decoded and bounded as it arrives, no content coding. A complete
// request comes out normalized (a plain Content-Length body, no Transfer-Encoding or Expect),
// the only form cpp-httplib's parser ever sees: every body is read as JSON, so its
// Content-Type is dropped (cpp-httplib would cut a form-labelled body at 8 KiB or parse it as
// multipart), and a '%' in a header value is escaped (cpp-httplib URL-decodes header values),
// so a handler reads each value as the client sent it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace weft::serve::detail {

struct RequestLimits {
  std::size_t max_body_bytes = 4u << 20;
  std::size_t max_uri_bytes = 8192;
  std::size_t max_head_bytes = 16384;  // request line and headers together
  // One header line as forwarded, without its CRLF: cpp-httplib refuses longer lines
  // (CPPHTTPLIB_HEADER_MAX_LENGTH, 8192 with the CRLF) with a bare 400.
  std::size_t max_header_line_bytes = 8190;
};

// The methods some path answers (a 405's Allow when a method is answered on no path).
inline constexpr const char* kAllowedMethods = "GET, HEAD, POST";

class RequestReader {
 public:
  enum class Step { kNeedMore, kComplete, kRefused };
  explicit RequestReader(RequestLimits limits) : limits_(limits) {}

  // Consumes what it can of `in` (erasing it); kComplete leaves any pipelined bytes in `in`.
  Step read(std::string& in);
  // Some byte of a request has arrived / its headers are complete, its body is not.
  bool started() const { return phase_ != Phase::kHead || started_; }
  bool in_body() const { return phase_ == Phase::kLength || phase_ >= Phase::kChunkSize; }
  // The client asked for "100 Continue" and the body it announced is within the limits.
  bool expects_continue() const { return expect_continue_ && in_body(); }
  // After kComplete: the request, normalized; the reader is ready for the next one.
  std::string take();
  // After kRefused: the status (400, 405, 413, 414, 415, 431, 501) and a message saying why;
  // a 405 is for a method no path answers, so the answer's Allow is kAllowedMethods.
  int status() const { return status_; }
  const std::string& error() const { return error_; }

 private:
  enum class Phase { kHead, kLength, kChunkSize, kChunkData, kChunkEnd, kTrailers, kDone };
  Step read_head(std::string& in);
  Step parse_head(std::string_view head);
  Step parse_request_line(std::string_view line);
  Step parse_header(std::string_view line);
  // Refuses a repeated header that must appear once (`seen` says whether it did).
  Step once(bool& seen, std::string_view name);
  Step forward_header(std::string_view name, std::string_view value);
  Step read_chunked(std::string& in);
  // Moves up to remaining_ bytes of `in` to the body; true once none remain.
  bool take_body(std::string& in);
  Step refuse(int status, std::string message);
  Step body_too_large();

  RequestLimits limits_;
  Phase phase_ = Phase::kHead;
  bool started_ = false;
  std::size_t scanned_ = 0;  // bytes of the head already searched for its end
  std::string head_;         // request line and the headers kept, each ending in CRLF
  std::string body_;
  std::uint64_t remaining_ = 0;  // of the Content-Length body, or of the current chunk
  bool has_length_ = false, chunked_ = false, expect_continue_ = false;
  bool has_authorization_ = false, has_host_ = false;
  int status_ = 0;
  std::string error_;
};

}  // namespace weft::serve::detail
