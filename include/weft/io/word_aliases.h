// Word aliases for pretrained vectors: a vocabulary word without a vector of its own takes the
// vector of the word its alias names (the treebank's clitic "n't" takes "not"'s). A table is a
// small text file, one "word alias" pair a line, so a reader can check every pair by eye; the
// project ships one for SST against the glove-sst vectors (resources/word_aliases/).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft::io {

struct WordAliases {
  std::string source;                                      // the file (or name) it came from
  std::vector<std::pair<std::string, std::string>> pairs;  // (word, alias), in file order
  std::vector<std::int64_t> lines;                         // the line of each pair

  // The alias of exactly `word`, or nullptr.
  const std::string* find(std::string_view word) const;
  std::size_t size() const { return pairs.size(); }

 private:
  friend WordAliases parse_word_aliases(std::string_view, std::string_view);
  std::unordered_map<std::string, std::size_t> index_;
};

// Parses a table. Format: UTF-8 text; fields separated by ASCII spaces or tabs; a line whose
// first non-blank character is '#' is a comment; blank lines are skipped; every other line is
// exactly two fields, the word and its alias. Throws weft::Error "[word_aliases]
// source:line:column: ..." for a line with one field or more than two, a word listed twice
// (naming the first line) and a word that is its own alias.
WordAliases parse_word_aliases(std::string_view text, std::string_view source);
// Reads and parses a file; throws "[word_aliases] cannot open 'path': ..." when it cannot.
WordAliases load_word_aliases(const std::string& path);

}  // namespace weft::io
WEFT_API_END
