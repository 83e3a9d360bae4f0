// The SST models' data (sentiment, attention): SST splits read from `data_dir/sst`, one
// vocabulary over their words (or the one a checkpoint stored), the embedding matrix (pretrained
// vectors where the file has them), and every tree in the blocks' Input form with word ids
// resolved: leaves {"label", "id"}, internal nodes {"label", "children"}; plus the SST options
// both models share. Private to src/models.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/blocks/compiler.h"
#include "weft/io/vocabulary.h"
#include "weft/io/word_vectors.h"
#include "weft/models/model.h"
#include "weft/models/options.h"

namespace weft::models {

constexpr int kSstClasses = 5;
constexpr int kSstNeutral = 2;

// The options the SST models share: embeddings, embedding_aliases ("sst": the table shipped in
// resources/word_aliases/sst_glove.txt; "none"; or a file), no_embeddings, embedding_dim
// (resolved from the vector file when there is one), dropout.
std::vector<OptionSpec> sst_options(double dropout_default, const char* aliases_default);

// The shipped SST alias table's text (generated from the resource at build time).
std::string_view shipped_sst_aliases();

// Word-vector coverage of the SST leaves read (every split), counted per occurrence.
struct TokenCoverage {
  std::int64_t found = 0, total = 0;
};

struct SentimentData {
  io::Vocabulary vocabulary;
  io::EmbeddingMatrix embeddings;  // matrix undefined unless vectors were read (training)
  TokenCoverage tokens;            // filled when vectors were read
  std::string aliases_source;      // the alias table used ("" when none)
  std::vector<nlohmann::json> train, dev, test;

  const std::vector<nlohmann::json>& split(train::Split which) const;
  std::int64_t embedding_dim() const { return embeddings.matrix.shape()[1]; }
};

// The data notes of an SST model that read vectors: coverage by type and by token, and how many
// words the alias table filled.
std::vector<std::string> coverage_notes(const SentimentData& data, std::string_view model);

// Reads what `init.use` needs (see ModelUse): the trees, unless inferring; the vocabulary from
// init.assets when given, else built over every split; the vectors only when training. Sets
// the resolved embedding_dim in `options`.
SentimentData load_sentiment_data(OptionValues& options, const ModelInit& init);
// The vocabulary as an asset (its words in id order, the unknown token first), and back.
nlohmann::json vocabulary_asset(const io::Vocabulary& vocabulary);
io::Vocabulary vocabulary_from_asset(const nlohmann::json& assets, std::string_view model);

// An SST tree as the model's Input, words looked up in `vocabulary` (unknown words map to its
// unknown id). Throws weft::Error naming `where` for a tree that is not binary.
nlohmann::json sentiment_example(const io::SstTree& tree, const io::Vocabulary& vocabulary,
                                 std::string_view where);
// One line of user input: a bracketed SST tree, or its JSON form (io/sst_json.h).
nlohmann::json sentiment_example_from_text(std::string_view line, std::string_view where,
                                           const io::Vocabulary& vocabulary);

// Per-row softmax figures of [n, 5] logits: the fine-grained argmax and the binary call
// (p(3) + p(4) against p(0) + p(1)). Shared by the SST models (sentiment, attention).
struct RowCalls {
  std::vector<int> fine;
  std::vector<bool> positive;
};
RowCalls call_rows(const Tensor& logits);
// Fine-grained and binary (neutral excluded) hits of `logits` rows against their labels, as
// "<prefix>_fine" and "<prefix>_binary".
void add_hits(train::MetricSet& metrics, const std::string& prefix, const Tensor& logits,
              const std::vector<std::int32_t>& labels);
// A metric's labels as class ids.
std::vector<std::int32_t> int_labels(const blocks::MetricValues& metric);

}  // namespace weft::models
