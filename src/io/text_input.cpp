// The line reader and position helpers shared by the io readers (see text_input.h).
#include "text_input.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "weft/core/error.h"
#include "weft/io/input_limits.h"
#include "weft/io/utf8.h"

namespace weft::io::detail {

LineReader::LineReader(const std::string& path, std::string_view where)
    : path_(path), where_(where) {
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) fail(where_, "cannot open '", path, "': ", std::strerror(errno));
}

LineReader::~LineReader() {
  std::free(buffer_);
  if (file_) std::fclose(file_);
}

bool LineReader::next(std::string_view& line) {
  const std::size_t max_bytes = std::size_t(input_limits().max_line_bytes);
  std::size_t size = 0;
  bool any = false, too_long = false;
  for (int c; (c = getc_unlocked(file_)) != EOF;) {
    any = true;
    if (c == '\n') break;
    if (size == max_bytes) {
      too_long = true;
      continue;
    }
    if (size == capacity_) {
      const std::size_t grown = std::min(std::max<std::size_t>(capacity_ * 2, 256), max_bytes);
      char* bigger = static_cast<char*>(std::realloc(buffer_, grown));
      if (bigger == nullptr)
        fail(where_, "out of memory reading line ", line_ + 1, " of '", path_, "'");
      buffer_ = bigger;
      capacity_ = grown;
    }
    buffer_[size++] = char(c);
  }
  if (std::ferror(file_))
    fail(where_, "reading '", path_, "' failed after line ", line_, ": ", std::strerror(errno));
  if (!any) return false;
  ++line_;
  if (too_long)
    fail(where_, path_, ":", line_, ": line longer than ", max_bytes, " bytes ",
         limit_hint("max_line_bytes"));
  if (size > 0 && buffer_[size - 1] == '\r') --size;
  line = std::string_view(buffer_, size);
  if (const auto bad = find_invalid_utf8(line))
    fail(where_, position(path_, line_, line, *bad), ": invalid UTF-8 (byte 0x",
         hex_byte(line[*bad]), ")");
  return true;
}

std::string hex_byte(char c) {
  constexpr char kDigits[] = "0123456789abcdef";
  const auto byte = static_cast<unsigned char>(c);
  return {kDigits[byte >> 4], kDigits[byte & 15]};
}

std::int64_t utf8_column(std::string_view line, std::size_t offset) {
  if (offset > line.size()) offset = line.size();
  std::int64_t column = 1;
  for (std::size_t i = 0; i < offset; ++i)
    if ((static_cast<unsigned char>(line[i]) & 0xC0) != 0x80) ++column;
  // An offset inside a multi-byte character points at that character, not past it.
  if (offset < line.size() && (static_cast<unsigned char>(line[offset]) & 0xC0) == 0x80) --column;
  return column;
}

std::string position(std::string_view file, std::int64_t line_number, std::string_view line,
                     std::size_t offset) {
  return weft::detail::concat_message(file, ":", line_number, ":", utf8_column(line, offset));
}

std::string shortened(std::string_view text, std::size_t limit) {
  if (text.size() <= limit) return std::string(text);
  std::size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

std::string quoted(std::string_view text) { return "'" + shortened(text, 40) + "'"; }

std::string_view trim_blanks(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

}  // namespace weft::io::detail
