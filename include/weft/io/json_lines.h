// JSON lines: one JSON value per line, the input format of Weft's tools (a file, or stdin).
// Blank lines are skipped; a line longer than input_limits().max_line_bytes is refused; a malformed
// line is reported as "[json_lines] file:line:column: <parser message>". Writing emits each value
// compactly on one line.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft::io {

// Parses one JSON text from an untrusted source. Nesting deeper than input_limits().max_json_depth
// is refused before the parser runs (the parser, the value's destructor and every recursive walk
// over the value stay within a small stack), and every parser complaint, a number out of range
// such as 1e400 included, becomes weft::Error "[where_tag] where:column: message" with the input
// quoted to at most about 40 characters.
nlohmann::json parse_json(std::string_view text, std::string_view where,
                          std::string_view where_tag = "json");

// `value` for an error message: compact JSON cut to about 60 characters.
std::string json_excerpt(const nlohmann::json& value);

// Reads one line of `in` into `line` without its '\n' (and a '\r' before it). A line longer
// than `max_bytes` is not buffered: the rest of it is skipped and `too_long` set. False at the
// end of the input.
bool read_bounded_line(std::istream& in, std::string& line, std::size_t max_bytes, bool& too_long);

// Called with each value and its 1-based line number.
using JsonLineCallback = std::function<void(nlohmann::json&& value, std::int64_t line)>;

// Streams the values of `in` (named `name` in errors, e.g. "<stdin>") to `callback`, without
// holding them all; throws weft::Error on the first malformed line or a read failure.
void for_each_json_line(std::istream& in, const std::string& name,
                        const JsonLineCallback& callback);

std::vector<nlohmann::json> read_json_lines(std::istream& in, const std::string& name = "<stdin>");
// Throws "[json_lines] cannot open 'path': ..." when the file cannot be opened.
std::vector<nlohmann::json> read_json_lines_file(const std::string& path);

// Writes `value` compactly and a '\n'; throws weft::Error when it holds invalid UTF-8 or the
// stream fails.
void write_json_line(std::ostream& out, const nlohmann::json& value);

}  // namespace weft::io
WEFT_API_END
