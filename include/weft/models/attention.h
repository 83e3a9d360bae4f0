// Feed-forward attention (Raffel & Ellis 2016) over SST sentences read as flat word sequences
// (the leaves of each tree, the root's 5-way label): h_t = the word's GloVe vector, e_t = a(h_t)
// a small FC network to a scalar, alpha = softmax of e over the sentence (no padding: each
// sentence is its own sequence of blocks), c = sum_t alpha_t h_t, then an FC classifier.
// Reported like the Tree-LSTM: fine-grained and binary (neutral excluded) root accuracy.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "weft/core/export.h"
#include "weft/models/block_model.h"

WEFT_API_BEGIN
namespace weft::models {

class AttentionModel : public BlockModel {
 public:
  explicit AttentionModel(const OptionValues& options, const ModelInit& init = {});
  ~AttentionModel() override;

  nlohmann::json assets() const override;  // {"vocabulary": [words in id order]}
  // A bracketed SST tree or its JSON form; only its words and root label are used.
  nlohmann::json parse_example(std::string_view line, std::string_view where) const override;
  std::vector<std::string> data_notes() const override;
  // Records skipped as bad ("file:line: why").
  const std::vector<std::string>& skipped() const;

 private:
  // {"label": k, "probabilities": [5], "binary": ..., "attention": [one weight per word]}.
  std::vector<nlohmann::json> predictions(const blocks::BatchResult& result,
                                          std::size_t count) override;
  train::BatchFigures figures(const blocks::BatchResult& result, const train::Batch& batch,
                              bool training) override;
  blocks::Block make_blocks();

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::models
WEFT_API_END
