// Reads SST and the word vectors for the sentiment model and converts trees to its Input form.
#include "sentiment_data.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "weft/core/error.h"
#include "weft/io/json_lines.h"
#include "weft/io/sst.h"
#include "weft/io/sst_json.h"
#include "weft/io/utf8.h"

namespace weft::models {
namespace {

std::vector<io::SstTree> read_split(const std::string& data_dir, const char* name,
                                    std::int64_t limit) {
  std::vector<io::SstTree> trees =
      io::read_sst_file(data_dir + "/sst/" + std::string(name) + ".txt");
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
  // A line from a Windows editor ends in "\r"; it is an end of line, not part of the tree.
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
    line.remove_suffix(1);
  if (const auto bad = io::find_invalid_utf8(line))
    fail("sentiment", where, ": byte ", *bad + 1, " is not UTF-8");
  const std::size_t start = line.find_first_not_of(" \t");
  if (start == std::string_view::npos) fail("sentiment", where, ": empty line");
  if (line[start] == '(') {
    return to_example(io::parse_sst_tree(line, where, 1), vocabulary, where);
  }
  const nlohmann::json value = io::parse_json(line, where, "sentiment");
  return to_example(io::sst_tree_from_input(value), vocabulary, where);
}

std::vector<OptionSpec> sst_options(double dropout_default, const char* aliases_default) {
  return {
      {.name = "embeddings",
       .kind = OptionKind::kString,
       .default_value = "",
       .help = "Word vectors, 'word v1 ... vd' per line (default: "
               "<data_dir>/glove-sst/glove.6B.100d.sst.txt)",
       .role = OptionRole::kData},
      {.name = "embedding_aliases",
       .kind = OptionKind::kString,
       .default_value = aliases_default,
       .help = "Aliases for words without a vector, 'word alias' per line: 'sst' (the table "
               "shipped in resources/word_aliases/sst_glove.txt), 'none', or a file",
       .role = OptionRole::kData},
      {.name = "no_embeddings",
       .kind = OptionKind::kBool,
       .default_value = false,
       .help = "Random, trainable word vectors instead of pretrained ones"},
      {.name = "embedding_dim",
       .default_value = 100,
       .help = "Word-vector size with --no-embeddings (otherwise the vector file's)",
       .min = 1,
       .max = 65536},
      {.name = "dropout",
       .kind = OptionKind::kFloat,
       .default_value = dropout_default,
       .help = "Drop probability on word vectors and before the softmax",
       .min = 0,
       .max = 0.95},
  };
}

nlohmann::json vocabulary_asset(const io::Vocabulary& vocabulary) { return vocabulary.words(); }

io::Vocabulary vocabulary_from_asset(const nlohmann::json& assets, std::string_view model) {
  const nlohmann::json words = assets.value("vocabulary", nlohmann::json());
  if (!words.is_array() || words.empty()) fail(model, "the assets hold no vocabulary");
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (!words[i].is_string()) fail(model, "vocabulary entry ", i, " is not a string");
  }
  io::Vocabulary vocabulary = io::Vocabulary::with_unknown(words[0].get<std::string>());
  for (std::size_t i = 1; i < words.size(); ++i) {
    const std::string& word = words[i].get_ref<const std::string&>();
    if (vocabulary.add(word) != std::int32_t(i)) {
      fail(model, "vocabulary entry ", i, " repeats the word '", word.substr(0, 40), "'");
    }
  }
  return vocabulary;
}

namespace {

void count_tokens(const io::SstTree& tree, const io::Vocabulary& vocabulary,
                  const std::vector<std::uint8_t>& pretrained, TokenCoverage& out) {
  if (tree.is_leaf()) {
    ++out.total;
    out.found += pretrained[std::size_t(vocabulary.id(tree.word))];
  }
  for (const io::SstTree& child : tree.children) count_tokens(child, vocabulary, pretrained, out);
}

// The alias table an `embedding_aliases` value names, or nothing for "none".
std::optional<io::WordAliases> read_aliases(const std::string& value) {
  if (value == "none") return std::nullopt;
  if (value == "sst")
    return io::parse_word_aliases(shipped_sst_aliases(), "resources/word_aliases/sst_glove.txt");
  return io::load_word_aliases(value);
}

}  // namespace

std::vector<std::string> coverage_notes(const SentimentData& data, std::string_view model) {
  const io::EmbeddingCoverage& c = data.embeddings.coverage;
  if (c.total == 0) return {};
  std::vector<std::string> notes{fmt::format(
      "{}: {} of {} vocabulary words have a pretrained vector ({:.1f}%), {} of {} SST tokens "
      "({:.1f}%)",
      model, c.found, c.total, 100.0 * c.fraction(), data.tokens.found, data.tokens.total,
      data.tokens.total == 0 ? 0.0
                             : 100.0 * double(data.tokens.found) / double(data.tokens.total))};
  if (!data.aliases_source.empty()) {
    std::string examples;
    for (std::size_t i = 0; i < c.aliased.size() && i < 6; ++i)
      examples += fmt::format("{}{} -> {}", i ? ", " : "", c.aliased[i].first, c.aliased[i].second);
    const char* close = c.aliased.empty() ? "" : c.aliased.size() > 6 ? ", ...)" : ")";
    notes.push_back(
        fmt::format("{}: the aliases of {} filled {} of these words with their "
                    "alias's vector{}{}{}",
                    model, data.aliases_source, c.aliased.size(), c.aliased.empty() ? "" : " (",
                    examples, close));
  }
  return notes;
}

SentimentData load_sentiment_data(OptionValues& options, const ModelInit& init) {
  SentimentData data;
  const std::string& dir = options.text("data_dir");
  const std::string& model = options.owner();
  std::vector<io::SstTree> train, dev, test;
  if (init.use != ModelUse::kInfer) {
    if (init.use == ModelUse::kTrain)
      train = read_split(dir, "train", options.integer("max_train"));
    dev = read_split(dir, "dev", options.integer("max_eval"));
    test = read_split(dir, "test", options.integer("max_eval"));
  }
  if (init.assets != nullptr) {
    data.vocabulary = vocabulary_from_asset(*init.assets, model);
  } else if (init.use == ModelUse::kTrain) {
    // One vocabulary over every split's words: with frozen pretrained vectors a dev or test word
    // keeps its GloVe vector (the vectors are unsupervised); a word without one is random.
    std::vector<io::SstTree> all = train;
    all.insert(all.end(), dev.begin(), dev.end());
    all.insert(all.end(), test.begin(), test.end());
    data.vocabulary = io::build_vocabulary(all);
  } else {
    fail(model, "needs the vocabulary of a checkpoint to evaluate or infer");
  }

  if (init.use == ModelUse::kTrain) {
    io::WordVectors vectors;
    if (!options.flag("no_embeddings")) {
      std::string path = options.text("embeddings");
      if (path.empty()) path = dir + "/glove-sst/glove.6B.100d.sst.txt";
      vectors = io::load_word_vectors(path);
      options.set("embedding_dim", vectors.dim(), "the vector file");
    } else {
      vectors.vectors = Tensor::zeros({0, options.integer("embedding_dim")});
    }
    const std::optional<io::WordAliases> aliases =
        options.flag("no_embeddings") ? std::nullopt
                                      : read_aliases(options.text("embedding_aliases"));
    if (aliases) data.aliases_source = aliases->source;
    data.embeddings = io::build_embedding_matrix(
        data.vocabulary, vectors,
        io::EmbeddingOptions{.seed = std::uint64_t(options.integer("seed")),
                             .lookup = io::VectorLookup::kGloveUncased,
                             .aliases = aliases ? &*aliases : nullptr});
    for (const auto* split : {&train, &dev, &test})
      for (const io::SstTree& tree : *split)
        count_tokens(tree, data.vocabulary, data.embeddings.pretrained, data.tokens);
  } else {
    data.embeddings.matrix =
        Tensor::zeros({data.vocabulary.size(), options.integer("embedding_dim")});
  }

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
