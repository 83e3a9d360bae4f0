// Stanford Sentiment Treebank (and other PTB-style) bracketed trees with integer labels:
// "(3 (2 It) (4 (2 's) (3 good)))". A leaf is "(label word)"; an internal node is
// "(label child ...)" with one or more children (SST itself is strictly binary). Tokens are
// split on ASCII spaces only, so a no-break space (U+00A0) inside an SST token stays in it.
// Errors read "[sst] train.txt:12:40: expected ')' but found end of line".
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft::io {

// Labels run from kSstMinLabel (very negative) to kSstMaxLabel (very positive).
inline constexpr int kSstMinLabel = 0;
inline constexpr int kSstMaxLabel = 4;
inline constexpr int kSstNumLabels = kSstMaxLabel - kSstMinLabel + 1;
// Trees nested deeper than input_limits().max_tree_depth (weft/io/input_limits.h) are
// rejected, so hostile input cannot exhaust the stack (SST's deepest tree is about 30 levels).

struct SstTree {
  int label = 0;
  std::string word;               // leaves only, exactly as written (PTB escapes kept)
  std::vector<SstTree> children;  // internal nodes only

  bool is_leaf() const { return children.empty(); }
  friend bool operator==(const SstTree&, const SstTree&) = default;
};

// Parses one tree from `text` (one line); `file` and `line` name it in errors. Throws
// weft::Error "[sst] file:line:column: expected ... but found ..." on any malformed input.
SstTree parse_sst_tree(std::string_view text, std::string_view file = "<string>",
                       std::int64_t line = 1);

// One tree per non-blank line of a file / of a multi-line string (blank lines are skipped;
// a '\r' before each '\n' is ignored). Errors name `path` / `name` and the line.
std::vector<SstTree> read_sst_file(const std::string& path);
std::vector<SstTree> read_sst_string(std::string_view text, std::string_view name = "<string>");

// The tree written back in the bracketed form (single spaces), so that
// parse_sst_tree(to_string(t)) == t.
std::string to_string(const SstTree& tree);

// The leaves' words, left to right.
std::vector<std::string> leaf_words(const SstTree& tree);

struct SstTreeStats {
  std::int64_t nodes = 0;   // all nodes, leaves included (each carries a label)
  std::int64_t leaves = 0;  // = words in the sentence
  std::int64_t depth = 0;   // nodes on the longest root-to-leaf path; a lone leaf has depth 1
  bool binary = true;       // every internal node has exactly two children
};
SstTreeStats tree_stats(const SstTree& tree);

struct SstCorpusStats {
  std::int64_t trees = 0;
  std::int64_t nodes = 0;
  std::int64_t leaves = 0;
  std::int64_t max_leaves = 0;  // longest sentence, in words
  std::int64_t max_depth = 0;
  std::int64_t non_binary_trees = 0;
  std::array<std::int64_t, kSstNumLabels> root_labels{};  // trees per root label
  std::array<std::int64_t, kSstNumLabels> node_labels{};  // nodes per label
};
SstCorpusStats corpus_stats(const std::vector<SstTree>& trees);

// A PTB-escaped token in plain text: -LRB- -> "(", -RRB- -> ")", -LCB- -> "{", -RCB- -> "}",
// "\/" -> "/", "\*" -> "*". Other text is returned unchanged.
std::string unescape_ptb(std::string_view token);

}  // namespace weft::io
WEFT_API_END
