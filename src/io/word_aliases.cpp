// Word-alias tables (see weft/io/word_aliases.h): parsed line by line with the shared position
// helpers, so every error names the file, line and column a reader would open.
#include "weft/io/word_aliases.h"

#include "text_input.h"
#include "weft/core/error.h"

namespace weft::io {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t'; }

// The fields of a line with the byte offset each starts at.
std::vector<std::pair<std::string_view, std::size_t>> split_fields(std::string_view line) {
  std::vector<std::pair<std::string_view, std::size_t>> fields;
  std::size_t pos = 0;
  while (true) {
    while (pos < line.size() && is_blank(line[pos])) ++pos;
    if (pos == line.size()) break;
    const std::size_t start = pos;
    while (pos < line.size() && !is_blank(line[pos])) ++pos;
    fields.emplace_back(line.substr(start, pos - start), start);
  }
  return fields;
}

}  // namespace

const std::string* WordAliases::find(std::string_view word) const {
  const auto it = index_.find(std::string(word));
  return it == index_.end() ? nullptr : &pairs[it->second].second;
}

WordAliases parse_word_aliases(std::string_view text, std::string_view source) {
  WordAliases table;
  table.source = std::string(source);
  std::int64_t number = 0;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::string_view content = detail::trim_blanks(line);
    if (content.empty() || content.front() == '#') continue;
    const auto fields = split_fields(line);
    auto where = [&](std::size_t offset) { return detail::position(source, number, line, offset); };
    if (fields.size() != 2) {
      const std::size_t offset = fields.size() < 2 ? line.size() : fields[2].second;
      fail("word_aliases", where(offset), ": expected two fields \"word alias\" but found ",
           fields.size(), ": ", detail::quoted(content));
    }
    const auto [word, alias] = std::pair(fields[0].first, fields[1].first);
    if (word == alias)
      fail("word_aliases", where(fields[1].second), ": the word ", detail::quoted(word),
           " is its own alias");
    const auto [it, added] = table.index_.emplace(std::string(word), table.pairs.size());
    if (!added)
      fail("word_aliases", where(fields[0].second), ": the word ", detail::quoted(word),
           " already has an alias (line ", table.lines[it->second], ")");
    table.pairs.emplace_back(std::string(word), std::string(alias));
    table.lines.push_back(number);
  }
  return table;
}

WordAliases load_word_aliases(const std::string& path) {
  detail::LineReader reader(path, "word_aliases");
  std::string text;
  std::string_view line;
  while (reader.next(line)) {
    text.append(line);
    text.push_back('\n');
  }
  return parse_word_aliases(text, path);
}

}  // namespace weft::io
