// The line reader and position helpers shared by the io readers (see text_input.h).
#include "text_input.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "weft/core/error.h"

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
  errno = 0;
  const ssize_t n = ::getline(&buffer_, &capacity_, file_);
  if (n < 0) {
    if (std::ferror(file_))
      fail(where_, "reading '", path_, "' failed after line ", line_, ": ", std::strerror(errno));
    return false;
  }
  ++line_;
  std::size_t size = std::size_t(n);
  if (size > 0 && buffer_[size - 1] == '\n') --size;
  if (size > 0 && buffer_[size - 1] == '\r') --size;
  line = std::string_view(buffer_, size);
  return true;
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

std::string quoted(std::string_view text) {
  constexpr std::size_t kLimit = 40;
  if (text.size() <= kLimit) return "'" + std::string(text) + "'";
  std::size_t cut = kLimit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return "'" + std::string(text.substr(0, cut)) + "...'";
}

std::string_view trim_blanks(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

}  // namespace weft::io::detail
