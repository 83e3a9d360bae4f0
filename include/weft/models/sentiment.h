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
#include <string>
#include <vector>

#include "weft/io/sst.h"
#include "weft/io/vocabulary.h"
#include "weft/models/model.h"

namespace weft::models {

struct SentimentOptions {
  std::string data_dir;         // holds sst/{train,dev,test}.txt
  std::string embeddings_path;  // word vectors ("word v1 ... vd"); empty: random, trainable
  std::int64_t hidden = 150;
  std::int64_t embedding_dim = 100;  // used when there are no embeddings
  float input_dropout = 0.25f;       // on word vectors
  float output_dropout = 0.25f;      // on h before the softmax layer
  float recurrent_dropout = 0.25f;   // on the cell's candidate (Semeniuta et al.)
  bool train_embeddings = true;      // fine-tuned, at the recipe's rate scale for "embedding/"
  std::uint64_t seed = 1;
  // 0: all; otherwise n evenly spaced trees (the files are ordered by label), for tests and demos.
  std::int64_t max_train_trees = 0;
  std::int64_t max_eval_trees = 0;
  int weave_threads = 0;  // 0: the compiler's default
};

class SentimentModel : public Model {
 public:
  // Reads the trees (and the vectors) and builds the model. Throws weft::Error naming the
  // file on unreadable or malformed data.
  explicit SentimentModel(SentimentOptions options);
  ~SentimentModel() override;

  std::string name() const override { return "sentiment"; }
  std::string config_json() const override;
  std::vector<Parameter> parameters() override;
  std::size_t num_examples(train::Split split) const override;
  train::BatchFigures train_batch(const train::Batch& batch, Rng& rng) override;
  train::BatchFigures eval_batch(const train::Batch& batch) override;
  std::unique_ptr<train::PreparedBatch> prepare_batch(train::Split split,
                                                      std::span<const std::size_t> ids) override;

  // A bracketed SST tree "(3 (2 a) ...)" or its JSON form ({"label", "word"/"children"}).
  nlohmann::json parse_example(std::string_view line, std::string_view where) const override;
  // {"label": k, "probabilities": [5], "binary": "positive"/"negative"} for the root.
  std::vector<nlohmann::json> predict(std::span<const nlohmann::json> examples) override;
  const blocks::Block& root_block() const override;
  std::span<const nlohmann::json> examples(train::Split split) const override;

  // Vocabulary words with a pretrained vector / all (the unknown token not counted).
  std::int64_t vectors_found() const;
  std::int64_t vocabulary_size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::models
