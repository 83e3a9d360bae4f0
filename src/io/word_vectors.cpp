// Text word-vector files and embedding matrices (see weft/io/word_vectors.h). Lines are read
// with the shared getline-based reader and numbers parsed with std::from_chars, so a
// 400k-line GloVe file loads at disk speed; every error names file, line and column.
#include "weft/io/word_vectors.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>

#include "text_input.h"
#include "weft/core/error.h"
#include "weft/core/rng.h"
#include "weft/io/input_limits.h"

namespace weft::io {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t'; }

// One line split into its word and values, or the reason it is malformed.
class RowParser {
 public:
  RowParser(std::string_view file, std::int64_t line_number, std::string_view line)
      : file_(file), number_(line_number), line_(line) {}

  // The word (first field); values go to `values`. Fails on a non-numeric value.
  std::string_view parse(std::vector<float>& values) {
    skip_blanks();
    const std::size_t start = pos_;
    while (pos_ < line_.size() && !is_blank(line_[pos_])) ++pos_;
    const std::string_view word = line_.substr(start, pos_ - start);
    const std::size_t max_values = std::size_t(input_limits().max_vector_dim);
    for (skip_blanks(); pos_ < line_.size(); skip_blanks()) {
      if (values.size() == max_values)
        error(pos_, weft::detail::concat_message("more than ", max_values, " values on one line ",
                                                 limit_hint("max_vector_dim")));
      value_starts_.push_back(pos_);
      values.push_back(parse_value());
    }
    return word;
  }

  // Byte offset of the i-th value (0-based), or the end of the line past the last one.
  std::size_t value_offset(std::size_t i) const {
    return i < value_starts_.size() ? value_starts_[i] : line_.size();
  }

  [[noreturn]] void error(std::size_t offset, const std::string& message) const {
    fail("word_vectors", detail::position(file_, number_, line_, offset), ": ", message);
  }

 private:
  float parse_value() {
    const char* begin = line_.data() + pos_;
    const char* end = line_.data() + line_.size();
    const char* stop = begin;
    while (stop < end && !is_blank(*stop)) ++stop;
    float value = 0;
    // from_chars rejects a leading '+', which some writers emit.
    const char* first = (*begin == '+' && stop - begin > 1) ? begin + 1 : begin;
    const auto [ptr, ec] = std::from_chars(first, stop, value);
    if (ec == std::errc::result_out_of_range || (ec == std::errc() && !std::isfinite(value)))
      error(pos_, "expected a finite float32 value but found " +
                      detail::quoted(std::string_view(begin, std::size_t(stop - begin))));
    if (ec != std::errc() || ptr != stop)
      error(pos_, "expected a number but found " +
                      detail::quoted(std::string_view(begin, std::size_t(stop - begin))));
    pos_ = std::size_t(stop - line_.data());
    return value;
  }

  void skip_blanks() {
    while (pos_ < line_.size() && is_blank(line_[pos_])) ++pos_;
  }

  std::string_view file_;
  std::int64_t number_;
  std::string_view line_;
  std::size_t pos_ = 0;
  std::vector<std::size_t> value_starts_;
};

std::optional<std::int64_t> parse_count(std::string_view text) {
  std::int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

struct Header {
  std::int64_t count = 0, dim = 0, line = 0;
};

// A "count dim" line: two non-negative integers and nothing else.
std::optional<Header> parse_header(std::string_view line, std::int64_t number) {
  line = detail::trim_blanks(line);
  const std::size_t gap = line.find_first_of(" \t");
  if (gap == std::string_view::npos) return std::nullopt;
  const auto count = parse_count(line.substr(0, gap));
  const auto dim = parse_count(detail::trim_blanks(line.substr(gap)));
  if (!count || !dim) return std::nullopt;
  return Header{*count, *dim, number};
}

class VectorFileReader {
 public:
  VectorFileReader(const std::string& path, const WordVectorOptions& options)
      : path_(path), options_(options), reader_(path, "word_vectors") {}

  WordVectors read() {
    std::string_view line;
    while (reader_.next(line)) {
      if (detail::trim_blanks(line).empty()) continue;
      if (first_line_ && take_header(line)) continue;
      first_line_ = false;
      read_row(line);
      if (options_.max_words > 0 && result_.vocabulary.size() >= options_.max_words) break;
    }
    finish();
    return std::move(result_);
  }

 private:
  // Handles the first non-blank line when it is (or must be) a "count dim" header.
  bool take_header(std::string_view line) {
    first_line_ = false;
    if (options_.header == VectorHeader::kNone) return false;
    header_ = parse_header(line, reader_.line_number());
    if (header_ && header_->dim > input_limits().max_vector_dim)
      fail("word_vectors", path_, ":", reader_.line_number(), ":1: the header announces ",
           header_->dim, "-dimensional vectors ", limit_hint("max_vector_dim"));
    if (header_) return true;
    if (options_.header == VectorHeader::kWord2Vec)
      fail("word_vectors", path_, ":", reader_.line_number(),
           ":1: expected a word2vec header \"count dim\" (two integers) but found ",
           detail::quoted(line));
    return false;
  }

  void read_row(std::string_view line) {
    row_.clear();
    RowParser parser(path_, reader_.line_number(), line);
    const std::string_view word = parser.parse(row_);
    if (row_.empty()) parser.error(line.size(), "expected values after the word but found none");
    if (dim_ == 0) set_dim(parser, line);
    if (std::int64_t(row_.size()) != dim_) {
      const std::size_t offset = parser.value_offset(std::min(row_.size(), std::size_t(dim_)));
      parser.error(offset, weft::detail::concat_message("expected ", dim_, " values (as on line ",
                                                        dim_line_, ") but found ", row_.size()));
    }
    if (result_.vocabulary.contains(word)) {
      ++result_.duplicates;
      return;
    }
    result_.vocabulary.add(word);
    values_.insert(values_.end(), row_.begin(), row_.end());
  }

  // The first vector fixes the dimension; a pending auto-detected header must agree with it.
  void set_dim(const RowParser& parser, std::string_view line) {
    if (header_ && header_->dim != std::int64_t(row_.size())) {
      if (options_.header == VectorHeader::kWord2Vec)
        parser.error(
            parser.value_offset(0),
            weft::detail::concat_message("expected ", header_->dim, " values (the header on line ",
                                         header_->line, ") but found ", row_.size()));
      fail("word_vectors", path_, ":", header_->line,
           ":1: this line looks like a \"count dim\" header but the next vector has ", row_.size(),
           " values, not ", header_->dim, "; pass VectorHeader::kNone if it is a vector");
    }
    dim_ = std::int64_t(row_.size());
    dim_line_ = reader_.line_number();
  }

  void finish() {
    const std::int64_t words = result_.vocabulary.size();
    if (header_ && options_.max_words == 0 && header_->count != words + result_.duplicates)
      fail("word_vectors", path_, ":", header_->line, ":1: the header announces ", header_->count,
           " vectors but the file has ", words + result_.duplicates);
    if (words == 0 && header_) dim_ = header_->dim;
    result_.vectors = Tensor::from_vector(Shape{words, dim_}, values_);
  }

  std::string path_;
  WordVectorOptions options_;
  detail::LineReader reader_;
  WordVectors result_;
  std::vector<float> values_, row_;
  std::optional<Header> header_;
  bool first_line_ = true;
  std::int64_t dim_ = 0, dim_line_ = 0;
};

std::string lower_ascii(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The row of `word` in `vectors` under `lookup`, or nothing.
std::optional<std::int32_t> lookup_row(std::string_view word, const WordVectors& vectors,
                                       VectorLookup lookup) {
  if (const auto row = vectors.vocabulary.find(word)) return row;
  if (lookup == VectorLookup::kExact) return std::nullopt;
  const std::string lower = lower_ascii(word);
  if (const auto row = vectors.vocabulary.find(lower)) return row;
  std::string plain;
  for (std::size_t i = 0; i < lower.size(); ++i)
    if (!(lower[i] == '\\' && i + 1 < lower.size())) plain += lower[i];
  if (const auto row = vectors.vocabulary.find(plain)) return row;
  if (word == "-LRB-") return vectors.vocabulary.find("(");
  if (word == "-RRB-") return vectors.vocabulary.find(")");
  return std::nullopt;
}

// The alias `word` takes under `options`, or nullptr.
const std::string* alias_of(std::string_view word, const EmbeddingOptions& options) {
  if (options.aliases == nullptr) return nullptr;
  if (const std::string* alias = options.aliases->find(word)) return alias;
  if (options.lookup == VectorLookup::kExact) return nullptr;
  return options.aliases->find(lower_ascii(word));
}

}  // namespace

WordVectors load_word_vectors(const std::string& path, const WordVectorOptions& options) {
  if (options.max_words < 0)
    fail("word_vectors", "max_words must be >= 0 but is ", options.max_words);
  return VectorFileReader(path, options).read();
}

EmbeddingMatrix build_embedding_matrix(const Vocabulary& vocabulary, const WordVectors& vectors,
                                       const EmbeddingOptions& options) {
  if (!vectors.vectors.defined() || vectors.vectors.rank() != 2 ||
      vectors.vectors.shape()[0] != vectors.vocabulary.size())
    fail("word_vectors", "the word vectors must be a [", vectors.vocabulary.size(),
         ", d] tensor, one row per word");
  const std::int64_t dim = vectors.dim();
  const std::vector<float> source = vectors.vectors.to_float_vector();
  std::vector<float> rows(std::size_t(vocabulary.size() * dim));
  EmbeddingMatrix out;
  out.pretrained.assign(std::size_t(vocabulary.size()), 0);
  Rng rng(options.seed);
  for (std::int32_t id = 0; id < vocabulary.size(); ++id) {
    float* row = rows.data() + std::size_t(id) * std::size_t(dim);
    const bool unknown = vocabulary.has_unknown() && id == vocabulary.unknown_id();
    const std::string& word = vocabulary.word(id);
    auto found = unknown ? std::nullopt : lookup_row(word, vectors, options.lookup);
    const std::string* alias = unknown || found ? nullptr : alias_of(word, options);
    if (alias != nullptr) {
      found = lookup_row(*alias, vectors, options.lookup);
      if (found) out.coverage.aliased.emplace_back(word, *alias);
    }
    // Draw for every row, found or not, so a row's random values do not depend on coverage.
    for (std::int64_t j = 0; j < dim; ++j)
      row[j] = rng.uniform(-options.init_scale, options.init_scale);
    if (!unknown) ++out.coverage.total;
    if (found) {
      std::copy_n(source.data() + std::size_t(*found) * std::size_t(dim), dim, row);
      out.pretrained[std::size_t(id)] = 1;
      ++out.coverage.found;
    } else if (!unknown) {
      out.coverage.missing.push_back(word);
    }
  }
  out.matrix = Tensor::from_vector(Shape{vocabulary.size(), dim}, rows);
  return out;
}

}  // namespace weft::io
