// JSON-lines reading and writing (see weft/io/json_lines.h). nlohmann-json parses each line;
// its messages are kept but re-anchored to the file's own line and column.
#include "weft/io/json_lines.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <istream>
#include <ostream>

#include "text_input.h"
#include "weft/core/error.h"

namespace weft::io {
namespace {

using Json = nlohmann::json;

// nlohmann's what() reads "[json.exception.parse_error.101] parse error at line 1, column 5:
// syntax error ..."; keep only the part after the position, which our prefix replaces.
std::string parser_message(const Json::parse_error& e) {
  std::string message = e.what();
  const std::size_t tag = message.find("] ");
  if (tag != std::string::npos) message.erase(0, tag + 2);
  const std::size_t colon = message.find(": ");
  if (message.rfind("parse error", 0) == 0 && colon != std::string::npos)
    message.erase(0, colon + 2);
  return message;
}

}  // namespace

void for_each_json_line(std::istream& in, const std::string& name,
                        const JsonLineCallback& callback) {
  std::string line;
  std::int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (detail::trim_blanks(line).empty()) continue;
    Json value;
    try {
      value = Json::parse(line);
    } catch (const Json::parse_error& e) {
      // e.byte is the 1-based byte index where parsing stopped.
      const std::size_t offset = e.byte > 0 ? std::size_t(e.byte - 1) : 0;
      fail("json_lines", detail::position(name, number, line, offset), ": ", parser_message(e));
    }
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
