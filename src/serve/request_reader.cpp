// The request framing of the server (request_reader.h): strict where lenience lets a request be
// read two ways (request smuggling) or makes the server buffer what the client never paid for.
#include "request_reader.h"

#include <algorithm>

#include <fmt/format.h>

#include "request_checks.h"

namespace weft::serve::detail {

namespace {

constexpr std::size_t kMaxChunkLine = 1024;  // a chunk's size line, extensions included

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

}  // namespace

RequestReader::Step RequestReader::refuse(int status, std::string message) {
  status_ = status;
  error_ = std::move(message);
  return Step::kRefused;
}

RequestReader::Step RequestReader::body_too_large() {
  return refuse(413, fmt::format("the body is larger than {} bytes", limits_.max_body_bytes));
}

RequestReader::Step RequestReader::read(std::string& in) {
  if (status_ != 0) return Step::kRefused;
  if (phase_ == Phase::kHead) {
    const Step step = read_head(in);
    if (step != Step::kComplete) return step;
  }
  if (phase_ == Phase::kLength) {
    if (!take_body(in)) return Step::kNeedMore;
    phase_ = Phase::kDone;
  }
  if (phase_ != Phase::kDone) return read_chunked(in);
  return Step::kComplete;
}

RequestReader::Step RequestReader::read_head(std::string& in) {
  // Blank lines before a request line are ignored (RFC 9112 2.2), so a stray CRLF after a
  // body does not make the next request malformed.
  while (!started_ && in.size() >= 2 && in[0] == '\r' && in[1] == '\n') in.erase(0, 2);
  if (!in.empty()) started_ = true;
  const std::size_t from = scanned_ >= 3 ? scanned_ - 3 : 0;
  const std::size_t end = in.find("\r\n\r\n", from);
  if (end == std::string::npos) {
    scanned_ = in.size();
    const std::size_t line_end = in.find("\r\n");
    const std::size_t line = line_end == std::string::npos ? in.size() : line_end;
    if (line > limits_.max_uri_bytes + 32) {
      return refuse(
          414, fmt::format("the request line is longer than {} bytes", limits_.max_uri_bytes + 32));
    }
    if (in.size() > limits_.max_head_bytes) {
      return refuse(431, fmt::format("the request's headers are larger than {} bytes",
                                     limits_.max_head_bytes));
    }
    return Step::kNeedMore;
  }
  if (end + 4 > limits_.max_head_bytes) {
    return refuse(
        431, fmt::format("the request's headers are larger than {} bytes", limits_.max_head_bytes));
  }
  const Step step = parse_head(std::string_view(in).substr(0, end + 2));
  in.erase(0, end + 4);
  return step;
}

RequestReader::Step RequestReader::parse_head(std::string_view head) {
  const std::size_t line_end = head.find("\r\n");
  if (const Step step = parse_request_line(head.substr(0, line_end)); step == Step::kRefused) {
    return step;
  }
  for (std::size_t at = line_end + 2; at < head.size();) {
    const std::size_t next = head.find("\r\n", at);
    const Step step = parse_header(head.substr(at, next - at));
    if (step == Step::kRefused) return step;
    at = next + 2;
  }
  if (chunked_ && has_length_) {
    return refuse(400, "a request may not have both Content-Length and Transfer-Encoding");
  }
  // No Content-Length and not chunked: a request without a body (RFC 9112 6.3).
  phase_ = chunked_ ? Phase::kChunkSize : remaining_ > 0 ? Phase::kLength : Phase::kDone;
  return Step::kComplete;
}

RequestReader::Step RequestReader::parse_request_line(std::string_view line) {
  const std::size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp1 == sp2 || !is_token(line.substr(0, sp1))) {
    return refuse(400, "malformed request line");
  }
  if (const std::size_t bad = first_control_character(line, false); bad != std::string_view::npos) {
    return refuse(400, fmt::format("the request line holds a control character (0x{:02X})",
                                   static_cast<unsigned char>(line[bad])));
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (target.size() > limits_.max_uri_bytes) {
    return refuse(414, fmt::format("the URI is longer than {} bytes", limits_.max_uri_bytes));
  }
  if (target.empty() || target.find(' ') != std::string_view::npos ||
      (version != "HTTP/1.1" && version != "HTTP/1.0")) {
    return refuse(400, "malformed request line (HTTP/1.1 or HTTP/1.0 expected)");
  }
  // The routes answer GET, HEAD and POST; the other standard methods reach them and are
  // answered 405 with the path's Allow. TRACE and CONNECT no path answers; the rest are unknown.
  static constexpr std::string_view kRouted[] = {"GET",    "HEAD",  "POST",   "PUT",
                                                 "DELETE", "PATCH", "OPTIONS"};
  if (method == "TRACE" || method == "CONNECT") {
    return refuse(405, fmt::format("{} is answered on no path here (this server answers {})",
                                   method, kAllowedMethods));
  }
  if (std::find(std::begin(kRouted), std::end(kRouted), method) == std::end(kRouted)) {
    return refuse(501, fmt::format("the method '{}' is not implemented (this server answers {})",
                                   method.substr(0, 32), kAllowedMethods));
  }
  head_.assign(line);
  head_ += "\r\n";
  return Step::kNeedMore;
}

RequestReader::Step RequestReader::once(bool& seen, std::string_view name) {
  if (seen) return refuse(400, fmt::format("more than one {} header", name));
  seen = true;
  return Step::kNeedMore;
}

RequestReader::Step RequestReader::parse_header(std::string_view line) {
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos || !is_token(line.substr(0, colon))) {
    return refuse(400, "malformed header line");
  }
  const std::string_view name = line.substr(0, colon);
  const std::string_view value = trim(line.substr(colon + 1));
  if (const std::size_t bad = first_control_character(value, false);
      bad != std::string_view::npos) {
    return refuse(400, fmt::format("the header '{}' holds a control character (0x{:02X})",
                                   name.substr(0, 64), static_cast<unsigned char>(value[bad])));
  }
  if (iequals(name, "Content-Length")) {
    const bool digits =
        !value.empty() && value.size() <= 18 &&
        std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) return refuse(400, "Content-Length must be a decimal number of bytes");
    const std::uint64_t length = std::stoull(std::string(value));
    if (has_length_ && length != remaining_) return refuse(400, "conflicting Content-Length");
    if (length > limits_.max_body_bytes) return body_too_large();
    has_length_ = true;
    remaining_ = length;
    return Step::kNeedMore;
  }
  if (iequals(name, "Transfer-Encoding")) {
    if (!iequals(value, "chunked") || chunked_) {
      return refuse(501, fmt::format("Transfer-Encoding '{}' is not supported (only chunked)",
                                     value.substr(0, 64)));
    }
    chunked_ = true;
    return Step::kNeedMore;
  }
  if (iequals(name, "Content-Encoding") && !iequals(value, "identity")) {
    return refuse(415, "compressed request bodies are not accepted");
  }
  if (iequals(name, "Expect")) {
    if (!iequals(value, "100-continue")) return refuse(417, "only Expect: 100-continue is known");
    expect_continue_ = true;
    return Step::kNeedMore;
  }
  if (iequals(name, "Content-Type")) return Step::kNeedMore;  // every body is read as JSON
  if (iequals(name, "Authorization") && once(has_authorization_, "Authorization") == Step::kRefused)
    return Step::kRefused;
  if (iequals(name, "Host") && once(has_host_, "Host") == Step::kRefused) return Step::kRefused;
  return forward_header(name, value);
}

// Appends the header as cpp-httplib will read it back unchanged: its '%' escaped, within
// cpp-httplib's line length.
RequestReader::Step RequestReader::forward_header(std::string_view name, std::string_view value) {
  std::string line(name);
  line += ": ";
  for (const char c : value) {
    if (c == '%') {
      line += "%25";
    } else {
      line += c;
    }
  }
  if (line.size() > limits_.max_header_line_bytes) {
    return refuse(431, fmt::format("the header '{}' is longer than {} bytes", name.substr(0, 64),
                                   limits_.max_header_line_bytes));
  }
  head_ += line;
  head_ += "\r\n";
  return Step::kNeedMore;
}

bool RequestReader::take_body(std::string& in) {
  const std::size_t n = std::size_t(std::min<std::uint64_t>(remaining_, in.size()));
  body_.append(in, 0, n);
  in.erase(0, n);
  remaining_ -= n;
  return remaining_ == 0;
}

RequestReader::Step RequestReader::read_chunked(std::string& in) {
  for (;;) {
    if (phase_ == Phase::kChunkData) {
      if (!take_body(in)) return Step::kNeedMore;
      phase_ = Phase::kChunkEnd;
    }
    const std::size_t eol = in.find("\r\n");
    if (eol == std::string::npos) {
      if (in.size() > kMaxChunkLine) return refuse(400, "a chunk's size line is too long");
      return Step::kNeedMore;
    }
    const std::string_view line = std::string_view(in).substr(0, eol);
    if (phase_ == Phase::kChunkEnd) {
      if (!line.empty()) return refuse(400, "a chunk is longer than its size says");
      phase_ = Phase::kChunkSize;
    } else if (phase_ == Phase::kTrailers) {
      if (line.empty()) phase_ = Phase::kDone;  // trailers are read and dropped
    } else {
      const std::string_view size = trim(line.substr(0, line.find(';')));
      std::uint64_t length = 0;
      if (size.empty() || size.size() > 15) return refuse(400, "malformed chunk size");
      for (const char c : size) {
        const int digit = std::isxdigit(static_cast<unsigned char>(c))
                              ? (std::isdigit(static_cast<unsigned char>(c))
                                     ? c - '0'
                                     : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10)
                              : -1;
        if (digit < 0) return refuse(400, "malformed chunk size");
        length = length * 16 + std::uint64_t(digit);
      }
      if (body_.size() + length > limits_.max_body_bytes) return body_too_large();
      remaining_ = length;
      phase_ = length == 0 ? Phase::kTrailers : Phase::kChunkData;
    }
    in.erase(0, eol + 2);
    if (phase_ == Phase::kDone) return Step::kComplete;
  }
}

std::string RequestReader::take() {
  std::string request = std::move(head_);
  request += fmt::format("Content-Length: {}\r\n\r\n", body_.size());
  request += body_;
  *this = RequestReader(limits_);
  return request;
}

}  // namespace weft::serve::detail
