// Shared by the io readers: a fast line reader over a file (POSIX getline, no iostream per
// line, any file size) and the position helpers behind "file:line:column" error messages.
// Columns count UTF-8 characters, so they match what an editor shows on non-ASCII lines.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace weft::io::detail {

class LineReader {
 public:
  // Opens `path`; throws "[where] cannot open 'path': <reason>" when it cannot.
  LineReader(const std::string& path, std::string_view where);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line without its '\n' (and without a '\r' before it); false at the end. The
  // view stays valid until the next call. Throws when reading fails midway, when the line is
  // longer than input_limits().max_line_bytes (without buffering it) or is not UTF-8.
  bool next(std::string_view& line);
  // 1-based number of the line last returned.
  std::int64_t line_number() const { return line_; }

 private:
  std::string path_;
  std::string where_;
  std::FILE* file_ = nullptr;
  char* buffer_ = nullptr;
  std::size_t capacity_ = 0;
  std::int64_t line_ = 0;
};

// Two lower-case hex digits ("ff") for a byte in a message.
std::string hex_byte(char c);

// The 1-based column (in UTF-8 characters) of byte `offset` in `line`.
std::int64_t utf8_column(std::string_view line, std::size_t offset);

// "file:line:column" for byte `offset` of `line`.
std::string position(std::string_view file, std::int64_t line_number, std::string_view line,
                     std::size_t offset);

// `text` cut to at most `limit` bytes (never inside a character), "..." marking a cut.
std::string shortened(std::string_view text, std::size_t limit);

// `text` quoted for a message, shortened to about 40 characters (never inside a character).
std::string quoted(std::string_view text);

// Removes ASCII spaces and tabs at both ends.
std::string_view trim_blanks(std::string_view text);

}  // namespace weft::io::detail
