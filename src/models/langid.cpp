// The hierarchical language-identification RNN with blocks: its registry entry and recipe, the
// model definition (make_blocks:
// a Fold of a GRU over characters inside a Map over words, then a Fold over words), the data
// (Tatoeba sentences as lists of words of character ids), batches and predictions.
#include "weft/models/langid.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "weft/autodiff/ops.h"
#include "weft/blocks/compiler.h"
#include "weft/core/error.h"
#include "weft/core/rng.h"
#include "weft/io/input_limits.h"
#include "weft/io/tatoeba.h"
#include "weft/io/utf8.h"
#include "weft/models/classification.h"
#include "weft/models/registry.h"
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

// Its registry entry: options char_embedding (32), char_hidden (64, word vectors), hidden (64,
// sentence vectors), dev_fraction (0.1), bad_records. Assets: the languages and the characters.
ModelEntry langid_entry() {
  ModelEntry entry;
  entry.name = "langid";
  entry.summary = "hierarchical RNN: characters -> words -> sentence, 10 Tatoeba languages";
  entry.input = "a sentence as plain text, or a data line \"id<TAB>language<TAB>text\"";
  entry.options = {
      {.name = "char_embedding",
       .default_value = 32,
       .help = "Character vector size",
       .min = 1,
       .max = 65536},
      {.name = "char_hidden",
       .default_value = 64,
       .help = "Word vector size (the character GRU's)",
       .min = 1,
       .max = 65536},
      {.name = "hidden",
       .default_value = 64,
       .help = "Sentence vector size (the word GRU's)",
       .min = 1,
       .max = 65536},
      {.name = "dev_fraction",
       .kind = OptionKind::kFloat,
       .default_value = 0.1,
       .help = "Share of the training sentences held out (seeded) as the dev set",
       .role = OptionRole::kData,
       .min = 0,
       .max = 0.9},
      {.name = "bad_records",
       .kind = OptionKind::kString,
       .default_value = "skip",
       .help = "An empty sentence: skip (and list it) or reject",
       .role = OptionRole::kData,
       .choices = {"skip", "reject"}},
  };
  entry.recipe = [](const OptionValues&) {
    return json{{"epochs", 8},
                {"batch_size", 32},
                {"optimizer", "adam"},
                {"learning_rate", 0.005},
                {"best_metric", "accuracy"}};
  };
  entry.create = [](const OptionValues& options, const ModelInit& init) {
    return std::make_unique<LangIdModel>(options, init);
  };
  return entry;
}

struct LangIdModel::Impl {
  const OptionValues& options;
  io::LangIdCorpus corpus;
  std::unordered_map<std::int32_t, std::int32_t> char_ids;  // code point -> id; 0 is unknown
  std::vector<std::int32_t> characters;                     // id - 1 -> code point
  std::array<std::vector<json>, 3> splits;
  std::unique_ptr<nn::Embedding> chars;
  std::unique_ptr<nn::GRUCell> char_cell, word_cell;
  std::unique_ptr<nn::FC> classifier;

  explicit Impl(const OptionValues& o) : options(o) {}

  void add_character(std::int32_t c) {
    if (char_ids.emplace(c, std::int32_t(char_ids.size()) + 1).second) characters.push_back(c);
  }

  // The languages and characters a checkpoint stored.
  void read_assets(const json& assets) {
    const json languages = assets.value("languages", json());
    const json stored_chars = assets.value("characters", json());
    if (!languages.is_array() || languages.empty()) fail("langid", "the assets hold no languages");
    if (!stored_chars.is_array()) fail("langid", "the assets hold no characters");
    std::vector<std::string> names;
    for (const json& name : languages) {
      if (!name.is_string()) fail("langid", "a stored language is not a string");
      names.push_back(name.get<std::string>());
    }
    if (!corpus.languages.empty() && corpus.languages != names) {
      fail("langid", "the data's languages differ from the checkpoint's");
    }
    corpus.languages = std::move(names);
    for (const json& c : stored_chars) {
      if (!c.is_number_integer() || c.get<std::int64_t>() < 0 || c.get<std::int64_t>() > 0x10FFFF) {
        fail("langid", "a stored character is not a code point: ", c.dump().substr(0, 40));
      }
      add_character(c.get<std::int32_t>());
    }
  }

  // A seeded dev_fraction of the training sentences is dev; characters are numbered over the
  // remaining training sentences only.
  void split_data(bool number_characters) {
    std::vector<std::size_t> order(corpus.train.size());
    std::iota(order.begin(), order.end(), std::size_t(0));
    Rng rng(mix64(std::uint64_t(options.integer("seed")), 0x1a9u));
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
    const auto dev_count = std::size_t(double(order.size()) * options.number("dev_fraction"));
    std::vector<std::size_t> train_ids(order.begin() + std::ptrdiff_t(dev_count), order.end());
    if (options.integer("max_train") > 0 &&
        train_ids.size() > std::size_t(options.integer("max_train"))) {
      train_ids.resize(std::size_t(options.integer("max_train")));
    }
    for (std::size_t id : train_ids) {
      if (!number_characters) break;
      for (const auto& word : langid_words(corpus.train[id].text)) {
        for (std::int32_t c : word) add_character(c);
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
    const std::size_t count =
        options.integer("max_eval") > 0 ? std::min(n, std::size_t(options.integer("max_eval"))) : n;
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
};

// The model, as blocks: characters -> word vector (Fold of a GRU), words -> sentence vector
// (another), sentence -> language logits.
Block LangIdModel::make_blocks() {
  Impl* m = impl_.get();
  const OptionValues& options = this->options();
  const Type ch = Type::vector(options.integer("char_embedding"));
  const Type word = Type::vector(options.integer("char_hidden")),
             sentence = Type::vector(options.integer("hidden"));
  Block embed = blocks::Scalar(DType::kInt32) >>
                Function("char", {Type::scalar(DType::kInt32)},
                         [m](std::span<const Var> in) { return (*m->chars)(in[0]); });
  Block char_step = Function("char_gru", {word, ch}, [m](std::span<const Var> in) {
    return (*m->char_cell)(in[1], in[0]);
  });
  Block word_step = Function("word_gru", {sentence, word}, [m](std::span<const Var> in) {
    return (*m->word_cell)(in[1], in[0]);
  });
  Block read_word = blocks::Map(embed) >> blocks::Fold(char_step, blocks::Zeros(word));
  Block read_sentence = blocks::GetItem("words") >> blocks::Map(read_word) >>
                        blocks::Fold(word_step, blocks::Zeros(sentence));
  Block classify = Function("classify", {sentence},
                            [m](std::span<const Var> in) { return (*m->classifier)(in[0]); });

  blocks::Composition g("langid");
  auto logits = g.add(read_sentence >> classify, g.input());
  g.add(blocks::Metric("language"), {logits, g.add(blocks::GetItem("label"), g.input())});
  g.set_output(logits);
  return g;
}

LangIdModel::LangIdModel(const OptionValues& options, const ModelInit& init)
    : BlockModel(options, init), impl_(std::make_unique<Impl>(this->options())) {
  Impl& m = *impl_;
  const OptionValues& o = this->options();
  if (init.use != ModelUse::kInfer) {
    const io::LangIdOptions read{.empty_sentences = o.text("bad_records") == "reject"
                                                        ? io::OnBadRow::kReject
                                                        : io::OnBadRow::kSkip};
    m.corpus = io::load_tatoeba_langid(o.text("data_dir") + "/tatoeba-langid", read);
  }
  if (init.assets != nullptr) m.read_assets(*init.assets);
  if (init.use != ModelUse::kInfer) m.split_data(init.assets == nullptr);
  if (init.use == ModelUse::kEvaluate) m.splits[0].clear();
  for (int s = 0; s < 3; ++s) split_examples(train::Split(s)) = std::move(m.splits[std::size_t(s)]);
  if (m.corpus.languages.empty()) fail("langid", "no languages to classify");

  nn::ParameterStore& s = store();
  const std::int64_t n_chars = std::int64_t(m.char_ids.size()) + 1;
  m.chars = std::make_unique<nn::Embedding>(s, "char", n_chars, o.integer("char_embedding"),
                                            nn::EmbeddingOptions{.mod_inputs = false});
  m.char_cell = std::make_unique<nn::GRUCell>(s, "char_gru", o.integer("char_embedding"),
                                              o.integer("char_hidden"));
  m.word_cell =
      std::make_unique<nn::GRUCell>(s, "word_gru", o.integer("char_hidden"), o.integer("hidden"));
  m.classifier = std::make_unique<nn::FC>(s, "classifier", o.integer("hidden"),
                                          std::int64_t(m.corpus.languages.size()),
                                          nn::FCOptions{.activation = nn::Activation::kNone});
  compile(make_blocks(), loom::Strategy::kAgenda);  // reaches the lower bound; by_depth does not
}

LangIdModel::~LangIdModel() = default;

train::BatchFigures LangIdModel::figures(const blocks::BatchResult& result,
                                         const train::Batch& /*batch*/, bool training) {
  return classify_examples(result.metric("language"), training);
}

json LangIdModel::assets() const {
  return json{{"languages", impl_->corpus.languages}, {"characters", impl_->characters}};
}

std::vector<std::string> LangIdModel::data_notes() const {
  const io::LangIdCorpus& c = impl_->corpus;
  if (c.train.empty() && c.test.empty()) return {};
  std::vector<std::string> notes{fmt::format(
      "langid: removed {} test sentences that also occur in training", c.overlap_removed)};
  if (!c.skipped.empty()) {
    notes.push_back(
        fmt::format("langid: skipped {} bad records (--bad-records skip):", c.skipped.size()));
    for (const std::string& record : c.skipped) notes.push_back("  " + record);
  }
  return notes;
}

json LangIdModel::parse_example(std::string_view line, std::string_view where) const {
  std::string_view text = line;
  int label = -1;  // unknown
  if (std::count(line.begin(), line.end(), '\t') == 2) {
    const std::size_t a = line.find('\t'), b = line.find('\t', a + 1);
    label = impl_->corpus.label(line.substr(a + 1, b - a - 1));
    text = line.substr(b + 1);
  }
  if (const auto bad = io::find_invalid_utf8(line))
    fail("langid", where, ": byte ", *bad + 1, " is not UTF-8");
  if (langid_words(text).empty()) fail("langid", where, ": empty sentence");
  // The character LSTM's graph (and memory, ~11 KB a character) grows with the sentence.
  const std::int64_t chars = std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  });
  if (chars > io::input_limits().max_sentence_chars)
    fail("langid", where, ": a sentence of ", chars, " characters ",
         io::limit_hint("max_sentence_chars"));
  return impl_->encode(text, label);
}

std::vector<json> LangIdModel::predictions(const blocks::BatchResult& result, std::size_t count) {
  const std::vector<float> logits = result.output(0).value().to_float_vector();
  const std::vector<std::string>& names = impl_->corpus.languages;
  const std::size_t n = names.size();
  std::vector<json> predictions;
  for (std::size_t i = 0; i < count; ++i) {
    const std::span<const float> row(logits.data() + i * n, n);
    const json p = probabilities_json(row);
    json probabilities = json::object();
    for (std::size_t k = 0; k < n; ++k) probabilities[names[k]] = p[k];
    const auto best = std::size_t(std::max_element(row.begin(), row.end()) - row.begin());
    predictions.push_back(json{{"language", names[best]}, {"probabilities", probabilities}});
  }
  return predictions;
}

const std::vector<std::string>& LangIdModel::languages() const { return impl_->corpus.languages; }
std::int64_t LangIdModel::overlap_removed() const { return impl_->corpus.overlap_removed; }
const std::vector<std::string>& LangIdModel::skipped() const { return impl_->corpus.skipped; }

}  // namespace weft::models
