// The hierarchical language-identification RNN with blocks: the model definition (make_blocks:
// a Fold of a GRU over characters inside a Map over words, then a Fold over words), the data
// (Tatoeba sentences as lists of words of character ids), batches and predictions.
#include "weft/models/langid.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "weft/autodiff/ops.h"
#include "weft/blocks/compiler.h"
#include "weft/core/error.h"
#include "weft/core/rng.h"
#include "weft/io/tatoeba.h"
#include "weft/models/blocks_runner.h"
#include "weft/nn/cells.h"
#include "weft/nn/embedding.h"
#include "weft/nn/fc.h"
#include "weft/nn/parameter_store.h"

namespace weft::models {

using blocks::Block;
using blocks::Function;
using blocks::Type;
using nlohmann::json;

namespace {

// Decodes one UTF-8 code point at `text[i]`, advancing i; invalid bytes give U+FFFD.
std::int32_t next_code_point(std::string_view text, std::size_t& i) {
  const auto byte = [&](std::size_t k) { return std::uint8_t(text[k]); };
  const std::uint8_t lead = byte(i++);
  int extra = lead < 0x80         ? 0
              : (lead >> 5) == 6  ? 1
              : (lead >> 4) == 14 ? 2
              : (lead >> 3) == 30 ? 3
                                  : -1;
  if (extra < 0) return 0xFFFD;
  std::int32_t code = extra == 0 ? lead : lead & (0x3F >> extra);
  for (; extra > 0; --extra) {
    if (i >= text.size() || (byte(i) >> 6) != 2) return 0xFFFD;
    code = (code << 6) | (byte(i++) & 0x3F);
  }
  return code;
}

bool is_space(std::int32_t c) { return c == ' ' || c == '\t' || c == 0x3000 || c == 0xA0; }

}  // namespace

std::vector<std::vector<std::int32_t>> langid_words(std::string_view text) {
  std::vector<std::vector<std::int32_t>> words(1);
  for (std::size_t i = 0; i < text.size();) {
    const std::int32_t c = next_code_point(text, i);
    if (!is_space(c)) {
      words.back().push_back(c);
    } else if (!words.back().empty()) {
      words.emplace_back();
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

struct LangIdModel::Impl {
  LangIdOptions options;
  io::LangIdCorpus corpus;
  std::unordered_map<std::int32_t, std::int32_t> char_ids;  // code point -> id; 0 is unknown
  std::vector<json> splits[3];
  nn::ParameterStore store;
  std::unique_ptr<nn::Embedding> chars;
  std::unique_ptr<nn::GRUCell> char_cell, word_cell;
  std::unique_ptr<nn::FC> classifier;
  BlocksRunner runner;

  explicit Impl(LangIdOptions opts) : options(std::move(opts)), store(options.seed) {
    io::LangIdOptions read{.empty_sentences = options.skip_bad_records ? io::OnBadRow::kSkip
                                                                       : io::OnBadRow::kReject};
    corpus = io::load_tatoeba_langid(options.data_dir, read);
    split_data();
    const std::int64_t n_chars = std::int64_t(char_ids.size()) + 1;
    chars = std::make_unique<nn::Embedding>(store, "char", n_chars, options.char_embedding,
                                            nn::EmbeddingOptions{.mod_inputs = false});
    char_cell = std::make_unique<nn::GRUCell>(store, "char_gru", options.char_embedding,
                                              options.char_hidden);
    word_cell =
        std::make_unique<nn::GRUCell>(store, "word_gru", options.char_hidden, options.hidden);
    classifier = std::make_unique<nn::FC>(store, "classifier", options.hidden,
                                          std::int64_t(corpus.languages.size()),
                                          nn::FCOptions{.activation = nn::Activation::kNone});
    runner.compile(make_blocks(), blocks::CompilerOptions{.threads = options.weave_threads});
  }

  // A seeded dev_fraction of the training sentences is dev; characters are numbered over the
  // remaining training sentences only.
  void split_data() {
    std::vector<std::size_t> order(corpus.train.size());
    std::iota(order.begin(), order.end(), std::size_t(0));
    Rng rng(mix64(options.seed, 0x1a9u));
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
    const auto dev_count = std::size_t(double(order.size()) * options.dev_fraction);
    std::vector<std::size_t> train_ids(order.begin() + std::ptrdiff_t(dev_count), order.end());
    if (options.max_train > 0 && train_ids.size() > std::size_t(options.max_train)) {
      train_ids.resize(std::size_t(options.max_train));
    }
    for (std::size_t id : train_ids) {
      for (const auto& word : langid_words(corpus.train[id].text)) {
        for (std::int32_t c : word) char_ids.emplace(c, std::int32_t(char_ids.size()) + 1);
      }
    }
    for (std::size_t id : train_ids) splits[0].push_back(example(corpus.train[id]));
    for (std::size_t k : evenly_spaced(dev_count)) {
      splits[1].push_back(example(corpus.train[order[k]]));
    }
    for (std::size_t k : evenly_spaced(corpus.test.size())) {
      splits[2].push_back(example(corpus.test[k]));
    }
  }

  // 0..n-1, or max_eval evenly spaced of them (the test file is ordered by language).
  std::vector<std::size_t> evenly_spaced(std::size_t n) const {
    const std::size_t count = options.max_eval > 0 ? std::min(n, std::size_t(options.max_eval)) : n;
    std::vector<std::size_t> ids(count);
    for (std::size_t k = 0; k < count; ++k) ids[k] = k * n / count;
    return ids;
  }

  json encode(std::string_view text, int label) const {
    json words = json::array();
    for (const auto& word : langid_words(text)) {
      json ids = json::array();
      for (std::int32_t c : word) {
        const auto found = char_ids.find(c);
        ids.push_back(found == char_ids.end() ? 0 : found->second);
      }
      words.push_back(std::move(ids));
    }
    return json{{"label", label}, {"words", std::move(words)}};
  }
  json example(const io::LangIdSentence& s) const {
    return encode(s.text, corpus.label(s.language));
  }

  // The model, as blocks: characters -> word vector (Fold of a GRU), words -> sentence vector
  // (another), sentence -> language logits.
  Block make_blocks() {
    const Type ch = Type::vector(options.char_embedding);
    const Type word = Type::vector(options.char_hidden), sentence = Type::vector(options.hidden);
    Block embed = blocks::Scalar(DType::kInt32) >>
                  Function("char", {Type::scalar(DType::kInt32)},
                           [this](std::span<const Var> in) { return (*chars)(in[0]); });
    Block char_step = Function("char_gru", {word, ch}, [this](std::span<const Var> in) {
      return (*char_cell)(in[1], in[0]);
    });
    Block word_step = Function("word_gru", {sentence, word}, [this](std::span<const Var> in) {
      return (*word_cell)(in[1], in[0]);
    });
    Block read_word = blocks::Map(embed) >> blocks::Fold(char_step, blocks::Zeros(word));
    Block read_sentence = blocks::GetItem("words") >> blocks::Map(read_word) >>
                          blocks::Fold(word_step, blocks::Zeros(sentence));
    Block classify = Function("classify", {sentence},
                              [this](std::span<const Var> in) { return (*classifier)(in[0]); });

    blocks::Composition g("langid");
    auto logits = g.add(read_sentence >> classify, g.input());
    g.add(blocks::Metric("language"), {logits, g.add(blocks::GetItem("label"), g.input())});
    g.set_output(logits);
    return g;
  }

  train::BatchFigures run(const train::Batch& batch, bool training, Rng* rng) {
    blocks::BatchResult result = runner.run(batch, splits[int(batch.split)], training, rng);
    return classify_examples(result.metric("language"), training);
  }
};

LangIdModel::LangIdModel(LangIdOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
LangIdModel::~LangIdModel() = default;

std::string LangIdModel::config_json() const {
  const LangIdOptions& o = impl_->options;
  return json{{"hidden", o.hidden},
              {"char_hidden", o.char_hidden},
              {"char_embedding", o.char_embedding},
              {"characters", impl_->char_ids.size()},
              {"dev_fraction", o.dev_fraction},
              {"seed", o.seed}}
      .dump();
}

std::vector<Parameter> LangIdModel::parameters() { return impl_->store.parameters(); }

std::size_t LangIdModel::num_examples(train::Split split) const {
  return impl_->splits[int(split)].size();
}

train::BatchFigures LangIdModel::train_batch(const train::Batch& batch, Rng& rng) {
  return impl_->run(batch, true, &rng);
}

train::BatchFigures LangIdModel::eval_batch(const train::Batch& batch) {
  return impl_->run(batch, false, nullptr);
}

std::unique_ptr<train::PreparedBatch> LangIdModel::prepare_batch(train::Split split,
                                                                 std::span<const std::size_t> ids) {
  return impl_->runner.prepare(impl_->splits[int(split)], ids);
}

json LangIdModel::parse_example(std::string_view line, std::string_view where) const {
  std::string_view text = line;
  int label = -1;  // unknown
  if (std::count(line.begin(), line.end(), '\t') == 2) {
    const std::size_t a = line.find('\t'), b = line.find('\t', a + 1);
    label = impl_->corpus.label(line.substr(a + 1, b - a - 1));
    text = line.substr(b + 1);
  }
  if (langid_words(text).empty()) fail("langid", where, ": empty sentence");
  return impl_->encode(text, label);
}

std::vector<json> LangIdModel::predict(std::span<const json> examples) {
  blocks::BatchResult result = impl_->runner.infer(examples);
  const std::vector<float> logits = result.output(0).value().to_float_vector();
  const std::vector<std::string>& names = impl_->corpus.languages;
  const std::size_t n = names.size();
  std::vector<json> predictions;
  for (std::size_t i = 0; i < examples.size(); ++i) {
    const std::span<const float> row(logits.data() + i * n, n);
    const json p = probabilities_json(row);
    json probabilities = json::object();
    for (std::size_t k = 0; k < n; ++k) probabilities[names[k]] = p[k];
    const auto best = std::size_t(std::max_element(row.begin(), row.end()) - row.begin());
    predictions.push_back(json{{"language", names[best]}, {"probabilities", probabilities}});
  }
  return predictions;
}

const Block& LangIdModel::root_block() const { return impl_->runner.root(); }

std::span<const json> LangIdModel::examples(train::Split split) const {
  return impl_->splits[int(split)];
}

const std::vector<std::string>& LangIdModel::languages() const { return impl_->corpus.languages; }
std::int64_t LangIdModel::overlap_removed() const { return impl_->corpus.overlap_removed; }
const std::vector<std::string>& LangIdModel::skipped() const { return impl_->corpus.skipped; }

}  // namespace weft::models
