// JSON lines: one JSON value per line, the input format of Weft's tools (a file, or stdin).
// Blank lines are skipped; a malformed line is reported as "[json_lines] file:line:column:
// <parser message>". Writing emits each value compactly on one line.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft::io {

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
