// Reads SST and the word vectors for the sentiment model and converts trees to its Input form.
#include "sentiment_data.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "weft/core/error.h"
#include "weft/io/sst.h"
#include "weft/io/sst_json.h"

namespace weft::models {
namespace {

std::vector<io::SstTree> read_split(const SentimentOptions& options, const char* name,
                                    std::int64_t limit) {
  std::vector<io::SstTree> trees =
      io::read_sst_file(options.data_dir + "/sst/" + std::string(name) + ".txt");
  const auto size = std::int64_t(trees.size());
  if (limit <= 0 || size <= limit) return trees;
  // Evenly spaced trees, not the first n: the SST files are ordered by label.
  std::vector<io::SstTree> subset;
  subset.reserve(std::size_t(limit));
  for (std::int64_t i = 0; i < limit; ++i) {
    subset.push_back(std::move(trees[std::size_t(i * size / limit)]));
  }
  return subset;
}

nlohmann::json to_example(const io::SstTree& tree, const io::Vocabulary& vocabulary,
                          std::string_view where) {
  if (tree.is_leaf()) return {{"label", tree.label}, {"id", vocabulary.id(tree.word)}};
  if (tree.children.size() != 2) {
    fail("sentiment", where, ": the binary Tree-LSTM needs binary trees, but a node has ",
         tree.children.size(), " children: ", io::to_string(tree));
  }
  nlohmann::json children = nlohmann::json::array();
  for (const io::SstTree& child : tree.children) {
    children.push_back(to_example(child, vocabulary, where));
  }
  return {{"label", tree.label}, {"children", std::move(children)}};
}

}  // namespace

const std::vector<nlohmann::json>& SentimentData::split(train::Split which) const {
  switch (which) {
    case train::Split::kTrain:
      return train;
    case train::Split::kDev:
      return dev;
    case train::Split::kTest:
      return test;
  }
  fail("sentiment", "unknown split");
}

nlohmann::json sentiment_example(const io::SstTree& tree, const io::Vocabulary& vocabulary,
                                 std::string_view where) {
  return to_example(tree, vocabulary, where);
}

nlohmann::json sentiment_example_from_text(std::string_view line, std::string_view where,
                                           const io::Vocabulary& vocabulary) {
  const std::size_t start = line.find_first_not_of(" \t");
  if (start == std::string_view::npos) fail("sentiment", where, ": empty line");
  if (line[start] == '(') {
    return to_example(io::parse_sst_tree(line, where, 1), vocabulary, where);
  }
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    fail("sentiment", where,
         ": expected a bracketed tree \"(3 (2 a) (3 b))\" or its JSON form, but: ", e.what());
  }
  return to_example(io::sst_tree_from_input(value), vocabulary, where);
}

SentimentData load_sentiment_data(const SentimentOptions& options) {
  SentimentData data;
  const std::vector<io::SstTree> train = read_split(options, "train", options.max_train_trees);
  const std::vector<io::SstTree> dev = read_split(options, "dev", options.max_eval_trees);
  const std::vector<io::SstTree> test = read_split(options, "test", options.max_eval_trees);

  // One vocabulary over every split's words: with frozen pretrained vectors a dev or test word
  // keeps its GloVe vector (the vectors are unsupervised); a word without one is random.
  std::vector<io::SstTree> all = train;
  all.insert(all.end(), dev.begin(), dev.end());
  all.insert(all.end(), test.begin(), test.end());
  data.vocabulary = io::build_vocabulary(all);

  io::WordVectors vectors;
  if (!options.embeddings_path.empty()) {
    vectors = io::load_word_vectors(options.embeddings_path);
  } else {
    vectors.vectors = Tensor::zeros({0, options.embedding_dim});
  }
  data.embeddings = io::build_embedding_matrix(
      data.vocabulary, vectors,
      io::EmbeddingOptions{.seed = options.seed, .lookup = io::VectorLookup::kGloveUncased});

  auto convert = [&](const std::vector<io::SstTree>& trees, const char* name,
                     std::vector<nlohmann::json>& out) {
    out.reserve(trees.size());
    for (std::size_t i = 0; i < trees.size(); ++i) {
      out.push_back(to_example(trees[i], data.vocabulary, fmt::format("{}.txt:{}", name, i + 1)));
    }
  };
  convert(train, "train", data.train);
  convert(dev, "dev", data.dev);
  convert(test, "test", data.test);
  return data;
}

RowCalls call_rows(const Tensor& logits) {
  const std::vector<float> values = logits.to_float_vector();
  const std::size_t rows = values.size() / kSstClasses;
  RowCalls calls;
  calls.fine.resize(rows);
  calls.positive.resize(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    const float* row = values.data() + r * kSstClasses;
    const float top = *std::max_element(row, row + kSstClasses);
    double p[kSstClasses];
    for (int k = 0; k < kSstClasses; ++k) p[k] = std::exp(double(row[k] - top));
    calls.fine[r] = int(std::max_element(row, row + kSstClasses) - row);
    calls.positive[r] = p[3] + p[4] > p[0] + p[1];
  }
  return calls;
}

void add_hits(train::MetricSet& metrics, const std::string& prefix, const Tensor& logits,
              const std::vector<std::int32_t>& labels) {
  const RowCalls calls = call_rows(logits);
  std::int64_t fine = 0, binary = 0, binary_total = 0;
  for (std::size_t r = 0; r < labels.size(); ++r) {
    fine += calls.fine[r] == labels[r];
    if (labels[r] == kSstNeutral) continue;
    ++binary_total;
    binary += calls.positive[r] == (labels[r] > kSstNeutral);
  }
  metrics.add_hits(prefix + "_fine", fine, std::int64_t(labels.size()));
  metrics.add_hits(prefix + "_binary", binary, binary_total);
}

std::vector<std::int32_t> int_labels(const blocks::MetricValues& metric) {
  std::vector<std::int32_t> labels;
  labels.reserve(metric.labels.size());
  for (const nlohmann::json& label : metric.labels) labels.push_back(label.get<std::int32_t>());
  return labels;
}

}  // namespace weft::models
