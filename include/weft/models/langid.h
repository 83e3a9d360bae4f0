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

#include "weft/core/export.h"
#include "weft/models/block_model.h"

WEFT_API_BEGIN
namespace weft::models {

class LangIdModel : public BlockModel {
 public:
  explicit LangIdModel(const OptionValues& options, const ModelInit& init = {});
  ~LangIdModel() override;

  // {"languages": [names in label order], "characters": [code points in id order, from id 1]}.
  nlohmann::json assets() const override;
  // A sentence as plain text, or a data line "id<TAB>language<TAB>text".
  nlohmann::json parse_example(std::string_view line, std::string_view where) const override;
  // Every output and metric holds class logits: an ensemble averages their probabilities.
  EnsembleAveraging ensemble_averaging() const override { return EnsembleAveraging::kSoftmax; }
  std::vector<std::string> data_notes() const override;

  const std::vector<std::string>& languages() const;
  std::int64_t overlap_removed() const;             // test sentences dropped from training
  const std::vector<std::string>& skipped() const;  // "file:line: empty sentence (id N)"

 private:
  // {"language": "eng", "probabilities": {"cat": p, ...}}.
  std::vector<nlohmann::json> predictions(const blocks::BatchResult& result,
                                          std::size_t count) override;
  train::BatchFigures figures(const blocks::BatchResult& result, const train::Batch& batch,
                              bool training) override;
  blocks::Block make_blocks();

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The whitespace-separated words of `text` as lists of Unicode code points (UTF-8 decoded;
// an invalid byte becomes U+FFFD). Text without whitespace is one word.
std::vector<std::vector<std::int32_t>> langid_words(std::string_view text);

}  // namespace weft::models
WEFT_API_END
