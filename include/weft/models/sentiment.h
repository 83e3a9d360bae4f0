// The paper's headline model: the binary Tree-LSTM of Tai et al. (2015) over Stanford
// Sentiment Treebank constituency trees, written with blocks. Leaves embed their word (GloVe
// vectors, fine-tuned at a tenth of the learning rate) through Tai et al.'s leaf module; internal
// nodes combine their two children with an N-ary Tree-LSTM cell (arity 2, no input); every node
// predicts one of 5 labels with a softmax. The loss is the sum of every node's cross-entropy per
// tree. Reported: fine-grained (5-way) and binary (negative vs positive, neutral excluded) accuracy
// at the root and over all nodes.
#pragma once

#include <cstdint>
#include <memory>

#include "weft/core/export.h"
#include "weft/models/block_model.h"

WEFT_API_BEGIN
namespace weft::models {

class SentimentModel : public BlockModel {
 public:
  // Reads the trees (and, for training, the vectors) and builds the model. Throws weft::Error
  // naming the file on unreadable or malformed data.
  explicit SentimentModel(const OptionValues& options, const ModelInit& init = {});
  ~SentimentModel() override;

  nlohmann::json assets() const override;  // {"vocabulary": [words in id order]}
  // A bracketed SST tree "(3 (2 a) ...)" or its JSON form ({"label", "word"/"children"}).
  nlohmann::json parse_example(std::string_view line, std::string_view where) const override;
  // Every output and metric holds class logits: an ensemble averages their probabilities.
  EnsembleAveraging ensemble_averaging() const override { return EnsembleAveraging::kSoftmax; }
  std::vector<std::string> data_notes() const override;

  // Vocabulary words with a pretrained vector / all (the unknown token not counted); 0 / 0
  // when no vectors were read.
  std::int64_t vectors_found() const;
  std::int64_t vocabulary_size() const;

 private:
  // {"label": k, "probabilities": [5], "binary": "positive"/"negative"} for the root.
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
