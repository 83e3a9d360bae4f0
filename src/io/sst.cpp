// The SST / PTB bracketed-tree reader (grammar and error format in weft/io/sst.h). A small
// recursive-descent parser over one line, depth-capped; every error names the file, line and
// column and what was expected there.
#include "weft/io/sst.h"

#include <algorithm>

#include "text_input.h"
#include "weft/core/error.h"
#include "weft/io/input_limits.h"

namespace weft::io {
namespace {

bool is_space(char c) { return c == ' '; }
bool is_paren(char c) { return c == '(' || c == ')'; }

class SstParser {
 public:
  SstParser(std::string_view text, std::string_view file, std::int64_t line)
      : text_(text), file_(file), line_(line) {}

  SstTree parse_line() {
    skip_spaces();
    if (at_end()) error("expected '(' to start a tree");
    SstTree tree = parse_node(1);
    skip_spaces();
    if (!at_end()) error("expected end of line after the tree");
    return tree;
  }

 private:
  SstTree parse_node(std::int64_t depth) {
    if (depth > input_limits().max_tree_depth)
      error(weft::detail::concat_message("trees nested deeper than ", input_limits().max_tree_depth,
                                         " levels are not accepted ", limit_hint("max_tree_depth"),
                                         "; expected ')'"));
    expect('(');
    SstTree node;
    node.label = parse_label();
    skip_spaces();
    if (at_end() || text_[pos_] == ')') error("expected a word or '(' after the label");
    if (text_[pos_] == '(') {
      while (!at_end() && text_[pos_] == '(') {
        node.children.push_back(parse_node(depth + 1));
        skip_spaces();
      }
    } else {
      node.word = std::string(token());
      skip_spaces();
      if (!at_end() && text_[pos_] == '(')
        error("expected ')' after the word " + detail::quoted(node.word) +
              " (a node holds either one word or child trees)");
    }
    expect(')');
    return node;
  }

  int parse_label() {
    skip_spaces();
    if (at_end() || is_paren(text_[pos_]))
      error(weft::detail::concat_message("expected a label ", kSstMinLabel, "..", kSstMaxLabel));
    const std::size_t start = pos_;
    const std::string_view label = token();
    const bool digit = label.size() == 1 && label[0] >= '0' && label[0] <= '9';
    const int value = digit ? label[0] - '0' : -1;
    if (value < kSstMinLabel || value > kSstMaxLabel) {
      pos_ = start;
      error(weft::detail::concat_message("expected a label ", kSstMinLabel, "..", kSstMaxLabel));
    }
    return value;
  }

  // The maximal run of characters that are neither ASCII spaces nor parentheses.
  std::string_view token() {
    const std::size_t start = pos_;
    while (!at_end() && !is_space(text_[pos_]) && !is_paren(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  void expect(char c) {
    skip_spaces();
    if (at_end() || text_[pos_] != c) error(std::string("expected '") + c + "'");
    ++pos_;
  }

  void skip_spaces() {
    while (!at_end() && is_space(text_[pos_])) ++pos_;
  }
  bool at_end() const { return pos_ >= text_.size(); }

  // "[sst] file:line:col: <expected> but found <what is at the cursor>".
  [[noreturn]] void error(const std::string& expected) const {
    std::string found = "end of line";
    if (!at_end()) {
      std::size_t end = pos_ + 1;
      if (!is_paren(text_[pos_]))
        while (end < text_.size() && !is_space(text_[end]) && !is_paren(text_[end])) ++end;
      found = detail::quoted(text_.substr(pos_, end - pos_));
    }
    fail("sst", detail::position(file_, line_, text_, pos_), ": ", expected, " but found ", found);
  }

  std::string_view text_;
  std::string_view file_;
  std::int64_t line_;
  std::size_t pos_ = 0;
};

bool blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t'; });
}

void write_tree(const SstTree& tree, std::string& out) {
  out += '(';
  out += std::to_string(tree.label);
  if (tree.is_leaf()) {
    out += ' ';
    out += tree.word;
  }
  for (const SstTree& child : tree.children) {
    out += ' ';
    write_tree(child, out);
  }
  out += ')';
}

void collect_words(const SstTree& tree, std::vector<std::string>& words) {
  if (tree.is_leaf()) words.push_back(tree.word);
  for (const SstTree& child : tree.children) collect_words(child, words);
}

void accumulate(const SstTree& tree, std::int64_t depth, SstTreeStats& stats,
                std::array<std::int64_t, kSstNumLabels>* labels) {
  ++stats.nodes;
  stats.depth = std::max(stats.depth, depth);
  if (labels && tree.label >= kSstMinLabel && tree.label <= kSstMaxLabel)
    ++(*labels)[std::size_t(tree.label - kSstMinLabel)];
  if (tree.is_leaf()) ++stats.leaves;
  if (!tree.is_leaf() && tree.children.size() != 2) stats.binary = false;
  for (const SstTree& child : tree.children) accumulate(child, depth + 1, stats, labels);
}

}  // namespace

SstTree parse_sst_tree(std::string_view text, std::string_view file, std::int64_t line) {
  return SstParser(text, file, line).parse_line();
}

std::vector<SstTree> read_sst_file(const std::string& path) {
  detail::LineReader reader(path, "sst");
  std::vector<SstTree> trees;
  std::string_view line;
  while (reader.next(line))
    if (!blank(line)) trees.push_back(parse_sst_tree(line, path, reader.line_number()));
  return trees;
}

std::vector<SstTree> read_sst_string(std::string_view text, std::string_view name) {
  std::vector<SstTree> trees;
  std::int64_t number = 0;
  while (!text.empty()) {
    const std::size_t end = std::min(text.find('\n'), text.size());
    std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!blank(line)) trees.push_back(parse_sst_tree(line, name, number));
  }
  return trees;
}

std::string to_string(const SstTree& tree) {
  std::string out;
  write_tree(tree, out);
  return out;
}

std::vector<std::string> leaf_words(const SstTree& tree) {
  std::vector<std::string> words;
  collect_words(tree, words);
  return words;
}

SstTreeStats tree_stats(const SstTree& tree) {
  SstTreeStats stats;
  accumulate(tree, 1, stats, nullptr);
  return stats;
}

SstCorpusStats corpus_stats(const std::vector<SstTree>& trees) {
  SstCorpusStats corpus;
  for (const SstTree& tree : trees) {
    SstTreeStats stats;
    accumulate(tree, 1, stats, &corpus.node_labels);
    ++corpus.trees;
    corpus.nodes += stats.nodes;
    corpus.leaves += stats.leaves;
    corpus.max_leaves = std::max(corpus.max_leaves, stats.leaves);
    corpus.max_depth = std::max(corpus.max_depth, stats.depth);
    if (!stats.binary) ++corpus.non_binary_trees;
    if (tree.label >= kSstMinLabel && tree.label <= kSstMaxLabel)
      ++corpus.root_labels[std::size_t(tree.label - kSstMinLabel)];
  }
  return corpus;
}

std::string unescape_ptb(std::string_view token) {
  if (token == "-LRB-") return "(";
  if (token == "-RRB-") return ")";
  if (token == "-LCB-") return "{";
  if (token == "-RCB-") return "}";
  std::string out;
  out.reserve(token.size());
  for (std::size_t i = 0; i < token.size(); ++i) {
    if (token[i] == '\\' && i + 1 < token.size() && (token[i + 1] == '/' || token[i + 1] == '*'))
      continue;
    out += token[i];
  }
  return out;
}

}  // namespace weft::io
