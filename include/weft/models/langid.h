// The original's hierarchical RNN for language identification: a GRU folds each word's
// characters into a word vector, a second GRU folds the words into a sentence vector, and a
// softmax layer picks one of the 10 Tatoeba languages (io/tatoeba.h). Words are split on
// whitespace; a sentence without any (Chinese, Japanese) is one word of all its characters.
// The test sentences that also occur in the training files are removed from training, and a
// seeded 10% of the rest is held out as the dev set.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "weft/models/model.h"

namespace weft::models {

struct LangIdOptions {
  std::string data_dir;  // holds the "<lang>_<n>.csv" files and testset.csv
  std::int64_t char_embedding = 32;
  std::int64_t char_hidden = 64;  // word vectors
  std::int64_t hidden = 64;       // sentence vectors
  double dev_fraction = 0.1;
  bool skip_bad_records = true;  // empty sentences: skip and list them, or throw
  std::uint64_t seed = 1;        // the dev split and initial weights
  std::int64_t max_train = 0;    // 0: all; else a seeded sample of the training sentences
  std::int64_t max_eval = 0;     // 0: all dev / test sentences; else n evenly spaced
  int weave_threads = 0;
};

class LangIdModel : public Model {
 public:
  explicit LangIdModel(LangIdOptions options);
  ~LangIdModel() override;

  std::string name() const override { return "langid"; }
  std::string config_json() const override;
  std::vector<Parameter> parameters() override;
  std::size_t num_examples(train::Split split) const override;
  train::BatchFigures train_batch(const train::Batch& batch, Rng& rng) override;
  train::BatchFigures eval_batch(const train::Batch& batch) override;
  std::unique_ptr<train::PreparedBatch> prepare_batch(train::Split split,
                                                      std::span<const std::size_t> ids) override;

  // A sentence as plain text, or a data line "id<TAB>language<TAB>text".
  nlohmann::json parse_example(std::string_view line, std::string_view where) const override;
  // {"language": "eng", "probabilities": {"cat": p, ...}}.
  std::vector<nlohmann::json> predict(std::span<const nlohmann::json> examples) override;
  const blocks::Block& root_block() const override;
  std::span<const nlohmann::json> examples(train::Split split) const override;

  const std::vector<std::string>& languages() const;
  std::int64_t overlap_removed() const;             // test sentences dropped from training
  const std::vector<std::string>& skipped() const;  // "file:line: empty sentence (id N)"

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The whitespace-separated words of `text` as lists of Unicode code points (UTF-8 decoded;
// an invalid byte becomes U+FFFD). Text without whitespace is one word.
std::vector<std::vector<std::int32_t>> langid_words(std::string_view text);

}  // namespace weft::models
