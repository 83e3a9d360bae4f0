// JSON parsing of untrusted text and JSON-lines reading and writing (see weft/io/json_lines.h).
// nlohmann-json parses; its messages are kept but re-anchored to the input's own line and
// column. A linear scan bounds the nesting before the parser sees the text.
#include "weft/io/json_lines.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <istream>
#include <optional>
#include <ostream>

#include "text_input.h"
#include "weft/core/error.h"
#include "weft/io/input_limits.h"

namespace weft::io {
namespace {

using Json = nlohmann::json;

// nlohmann's what() reads "[json.exception.parse_error.101] parse error at line 1, column 5:
// syntax error ..."; keep only the part after the position, which our prefix replaces.
std::string parser_message(const Json::exception& e) {
  std::string message = e.what();
  const std::size_t tag = message.find("] ");
  if (tag != std::string::npos) message.erase(0, tag + 2);
  const std::size_t colon = message.find(": ");
  if (message.rfind("parse error", 0) == 0 && colon != std::string::npos)
    message.erase(0, colon + 2);
  // The parser quotes the token it stopped at ("last read: '...'"), which can be the whole
  // input; keep the message about a line long.
  return detail::shortened(message, 160);
}

struct JsonFailure {
  std::size_t offset;  // byte offset in the text where the problem is
  std::string message;
};

// The byte offset where nesting first exceeds `limit`, or nothing. Brackets inside strings do
// not count; an unterminated string ends the scan (the parser reports it).
std::optional<std::size_t> too_deep_at(std::string_view text, std::int64_t limit) {
  std::int64_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::nullopt;
}

std::optional<JsonFailure> try_parse(std::string_view text, Json& out) {
  const std::int64_t limit = input_limits().max_json_depth;
  if (const auto at = too_deep_at(text, limit))
    return JsonFailure{*at, weft::detail::concat_message("JSON nested deeper than ", limit,
                                                         " levels ", limit_hint("max_json_depth"))};
  try {
    out = Json::parse(text);
  } catch (const Json::parse_error& e) {
    // e.byte is the 1-based byte index where parsing stopped.
    return JsonFailure{e.byte > 0 ? std::size_t(e.byte - 1) : 0, parser_message(e)};
  } catch (const Json::exception& e) {  // e.g. out_of_range for 1e400
    return JsonFailure{0, parser_message(e)};
  }
  return std::nullopt;
}

}  // namespace

nlohmann::json parse_json(std::string_view text, std::string_view where,
                          std::string_view where_tag) {
  Json value;
  if (const auto failure = try_parse(text, value))
    fail(where_tag, where, ":", detail::utf8_column(text, failure->offset), ": ", failure->message);
  return value;
}

std::string json_excerpt(const nlohmann::json& value) {
  return detail::shortened(value.dump(-1, ' ', false, Json::error_handler_t::replace), 60);
}

bool read_bounded_line(std::istream& in, std::string& line, std::size_t max_bytes, bool& too_long) {
  line.clear();
  too_long = false;
  std::streambuf* buffer = in.rdbuf();
  bool any = false;
  for (;;) {
    const int c = buffer->sbumpc();
    if (c == std::char_traits<char>::eof()) {
      in.setstate(std::ios::eofbit);
      break;
    }
    any = true;
    if (c == '\n') break;
    if (line.size() < max_bytes)
      line.push_back(char(c));
    else
      too_long = true;
  }
  if (!too_long && !line.empty() && line.back() == '\r') line.pop_back();
  return any;
}

void for_each_json_line(std::istream& in, const std::string& name,
                        const JsonLineCallback& callback) {
  const std::size_t max_bytes = std::size_t(input_limits().max_line_bytes);
  std::string line;
  bool too_long = false;
  std::int64_t number = 0;
  while (read_bounded_line(in, line, max_bytes, too_long)) {
    ++number;
    if (too_long)
      fail("json_lines", name, ":", number, ": line longer than ", max_bytes, " bytes ",
           limit_hint("max_line_bytes"));
    if (detail::trim_blanks(line).empty()) continue;
    Json value;
    if (const auto failure = try_parse(line, value))
      fail("json_lines", detail::position(name, number, line, failure->offset), ": ",
           failure->message);
    callback(std::move(value), number);
  }
  if (in.bad()) fail("json_lines", "reading '", name, "' failed after line ", number);
}

std::vector<nlohmann::json> read_json_lines(std::istream& in, const std::string& name) {
  std::vector<Json> values;
  for_each_json_line(in, name,
                     [&](Json&& value, std::int64_t) { values.push_back(std::move(value)); });
  return values;
}

std::vector<nlohmann::json> read_json_lines_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("json_lines", "cannot open '", path, "': ", std::strerror(errno));
  return read_json_lines(in, path);
}

void write_json_line(std::ostream& out, const nlohmann::json& value) {
  std::string text;
  try {
    text = value.dump(-1, ' ', false, Json::error_handler_t::strict);
  } catch (const Json::type_error& e) {
    std::string message = e.what();
    const std::size_t tag = message.find("] ");
    fail("json_lines",
         "cannot write a value: ", tag == std::string::npos ? message : message.substr(tag + 2));
  }
  text += '\n';
  out.write(text.data(), std::streamsize(text.size()));
  if (!out) fail("json_lines", "writing a JSON line failed");
}

}  // namespace weft::io
