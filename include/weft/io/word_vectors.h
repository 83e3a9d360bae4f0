// Pretrained word vectors from text files, one "word v1 ... vd" per line (GloVe; word2vec's
// text format with its "count dim" first line), and the embedding matrix for a model's own
// vocabulary: rows copied from the file where the word has a vector, seeded random
// (trainable) rows where it has none, with the coverage reported.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/core/export.h"
#include "weft/io/vocabulary.h"
#include "weft/io/word_aliases.h"
#include "weft/tensor/tensor.h"

WEFT_API_BEGIN
namespace weft::io {

struct WordVectors {
  Vocabulary vocabulary;        // word -> row of `vectors` (no unknown-word id)
  Tensor vectors;               // float32 [V, d]
  std::int64_t duplicates = 0;  // later lines whose word was already read (skipped)

  std::int64_t dim() const { return vectors.defined() ? vectors.shape()[1] : 0; }
};

enum class VectorHeader {
  kAuto,      // skip a first line of two integers "count dim" when the next line fits it
  kNone,      // GloVe: every line is a vector
  kWord2Vec,  // the first line must be "count dim"
};

struct WordVectorOptions {
  VectorHeader header = VectorHeader::kAuto;
  // Stop after this many vectors (0: read all), for quick experiments on large files.
  std::int64_t max_words = 0;
};

// Reads a whole file. Fields are separated by ASCII spaces (tabs too), so a no-break space
// inside a word stays part of it. Blank lines are skipped. Throws weft::Error "[word_vectors]
// file:line:column: ..." for a value that is not a finite number, a line whose number of
// values differs from the first vector's ("ragged"), a line with a word but no values, and a
// word2vec header that disagrees with the data.
WordVectors load_word_vectors(const std::string& path, const WordVectorOptions& options = {});

// How a vocabulary word is looked up among the vectors.
enum class VectorLookup {
  kExact,  // the exact word only
  // The exact word, then lower case, then lower case without PTB backslash escapes ("\/"),
  // then -LRB- / -RRB- as "(" / ")": the rule glove-sst was built with, for uncased GloVe.
  kGloveUncased,
};

struct EmbeddingOptions {
  std::uint64_t seed = 0;
  // Rows without a vector are drawn uniform in [-init_scale, init_scale].
  float init_scale = 0.05f;
  VectorLookup lookup = VectorLookup::kExact;
  // Consulted for a word the lookup finds no vector for: the word's alias (the exact word's
  // entry, else, under kGloveUncased, its lower-case form's) is looked up the same way, with no
  // chains (an alias's own alias is not followed). Not owned; nullptr: no aliases.
  const WordAliases* aliases = nullptr;
};

struct EmbeddingCoverage {
  std::int64_t found = 0;            // vocabulary words that got a pretrained vector (own or alias)
  std::int64_t total = 0;            // vocabulary words, the unknown token not counted
  std::vector<std::string> missing;  // in vocabulary order
  // The words of `found` that got their alias's vector, (word, alias) in vocabulary order.
  std::vector<std::pair<std::string, std::string>> aliased;
  double fraction() const { return total == 0 ? 1.0 : double(found) / double(total); }
};

struct EmbeddingMatrix {
  Tensor matrix;                         // float32 [vocabulary.size(), d]
  std::vector<std::uint8_t> pretrained;  // per row: 1 when copied from the vectors
  EmbeddingCoverage coverage;
};

// One row per id of `vocabulary`. The unknown token's row is always random.
EmbeddingMatrix build_embedding_matrix(const Vocabulary& vocabulary, const WordVectors& vectors,
                                       const EmbeddingOptions& options = {});

}  // namespace weft::io
WEFT_API_END
