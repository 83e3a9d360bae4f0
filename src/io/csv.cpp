// The CSV reader (see weft/io/csv.h): one pass over the text, tracking line and column for
// messages; a row is a list of fields, quoted or not, ending at an unquoted newline.
#include "weft/io/csv.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "text_input.h"
#include "weft/core/error.h"
#include "weft/io/utf8.h"

namespace weft::io {
namespace {

class CsvParser {
 public:
  CsvParser(std::string_view text, std::string_view name, char delimiter)
      : text_(text), name_(name), delimiter_(delimiter) {}

  // The next row, or false at the end of the text. Blank lines are skipped.
  bool next(CsvRow& row) {
    while (pos_ < text_.size() && at_newline()) skip_newline();
    if (pos_ >= text_.size()) return false;
    row.line = line_;
    row.fields.clear();
    for (;;) {
      row.fields.push_back(field());
      if (pos_ >= text_.size()) return true;
      if (at_newline()) {
        skip_newline();
        return true;
      }
      ++pos_;  // the delimiter
    }
  }

 private:
  std::string field() {
    if (pos_ < text_.size() && text_[pos_] == '"') return quoted_field();
    const std::size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != delimiter_ && !at_newline()) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  std::string quoted_field() {
    const std::int64_t open_line = line_;
    const std::int64_t open_column = column(pos_++);
    std::string value;
    for (;;) {
      if (pos_ >= text_.size())
        fail("csv", name_, ":", open_line, ":", open_column,
             ": expected a closing '\"' for the field opened here but found end of file");
      const char c = text_[pos_++];
      if (c == '"') {
        if (pos_ < text_.size() && text_[pos_] == '"') {
          value += '"';
          ++pos_;
          continue;
        }
        break;
      }
      if (c == '\n') {
        ++line_;
        line_start_ = pos_;
      }
      value += c;
    }
    if (pos_ < text_.size() && text_[pos_] != delimiter_ && !at_newline())
      fail("csv", name_, ":", line_, ":", column(pos_), ": expected '", delimiter_,
           "' or end of line after a closing quote but found ",
           detail::quoted(text_.substr(pos_, 1)));
    return value;
  }

  bool at_newline() const {
    return text_[pos_] == '\n' ||
           (text_[pos_] == '\r' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '\n');
  }
  void skip_newline() {
    pos_ += text_[pos_] == '\r' ? 2 : 1;
    ++line_;
    line_start_ = pos_;
  }
  std::int64_t column(std::size_t offset) const {
    const std::size_t end = text_.find('\n', line_start_);
    const std::string_view line = text_.substr(
        line_start_, (end == std::string_view::npos ? text_.size() : end) - line_start_);
    return detail::utf8_column(line, offset - line_start_);
  }

  std::string_view text_;
  std::string_view name_;
  char delimiter_;
  std::size_t pos_ = 0, line_start_ = 0;
  std::int64_t line_ = 1;
};

}  // namespace

std::size_t CsvTable::column(std::string_view name) const {
  for (std::size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return i;
  std::string columns;
  for (const std::string& h : header) columns += (columns.empty() ? "'" : ", '") + h + "'";
  fail("csv", source, ": no column '", name, "' (columns: ", columns.empty() ? "none" : columns,
       ")");
}

CsvTable parse_csv(std::string_view text, std::string_view name, const CsvOptions& options) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // a UTF-8 byte-order mark
  if (const auto bad = find_invalid_utf8(text)) {
    const std::string_view before = text.substr(0, *bad);
    const std::int64_t line = 1 + std::count(before.begin(), before.end(), '\n');
    const std::size_t start =
        before.rfind('\n') == std::string_view::npos ? 0 : before.rfind('\n') + 1;
    const std::string_view text_line = text.substr(start, text.find('\n', *bad) - start);
    fail("csv", detail::position(name, line, text_line, *bad - start), ": invalid UTF-8 (byte 0x",
         detail::hex_byte(text[*bad]), ")");
  }
  CsvParser parser(text, name, options.delimiter);
  CsvTable table;
  table.source = std::string(name);
  CsvRow row;
  if (options.has_header && parser.next(row)) table.header = std::move(row.fields);
  while (parser.next(row)) table.rows.push_back(std::move(row));
  return table;
}

CsvTable read_csv_file(const std::string& path, const CsvOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("csv", "cannot open '", path, "': ", std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("csv", "reading '", path, "' failed");
  return parse_csv(text.str(), path, options);
}

}  // namespace weft::io
