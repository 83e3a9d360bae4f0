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

#include "weft/models/model.h"

namespace weft::models {

struct AttentionOptions {
  std::string data_dir;                // holds sst/{train,dev,test}.txt
  std::string embeddings_path;         // word vectors; empty: random, trainable
  std::int64_t embedding_dim = 100;    // used when there are no embeddings
  std::int64_t attention_hidden = 64;  // a(h) = w . tanh(W h + b)
  std::int64_t hidden = 128;           // the classifier's hidden layer
  float input_dropout = 0.25f;         // on word vectors
  float output_dropout = 0.25f;        // on the classifier's hidden layer
  bool train_embeddings = false;
  bool skip_bad_records = true;  // a sentence without words: skip and list it, or throw
  std::uint64_t seed = 1;
  std::int64_t max_train_trees = 0;  // 0: all; else evenly spaced trees (as sentiment)
  std::int64_t max_eval_trees = 0;
  int weave_threads = 0;
};

class AttentionModel : public Model {
 public:
  explicit AttentionModel(AttentionOptions options);
  ~AttentionModel() override;

  std::string name() const override { return "attention"; }
  std::string config_json() const override;
  std::vector<Parameter> parameters() override;
  std::size_t num_examples(train::Split split) const override;
  train::BatchFigures train_batch(const train::Batch& batch, Rng& rng) override;
  train::BatchFigures eval_batch(const train::Batch& batch) override;
  std::unique_ptr<train::PreparedBatch> prepare_batch(train::Split split,
                                                      std::span<const std::size_t> ids) override;

  // A bracketed SST tree or its JSON form; only its words and root label are used.
  nlohmann::json parse_example(std::string_view line, std::string_view where) const override;
  // {"label": k, "probabilities": [5], "binary": ..., "attention": [one weight per word]}.
  std::vector<nlohmann::json> predict(std::span<const nlohmann::json> examples) override;
  const blocks::Block& root_block() const override;
  std::span<const nlohmann::json> examples(train::Split split) const override;

  // Records skipped as bad ("file:line: why").
  const std::vector<std::string>& skipped() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::models
