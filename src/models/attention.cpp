// Feed-forward attention over SST sentences with blocks: its registry entry and recipe, the
// model definition (make_blocks:
// Map / Max / Sum / Broadcast / Zip), its batches and predictions. Data comes through the
// sentiment model's loader (sentiment_data.h); trees are flattened to their words here.
#include "weft/models/attention.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "sentiment_data.h"
#include "weft/autodiff/ops.h"
#include "weft/blocks/compiler.h"
#include "weft/core/error.h"
#include "weft/models/classification.h"
#include "weft/models/registry.h"
#include "weft/nn/embedding.h"
#include "weft/nn/fc.h"
#include "weft/nn/initializers.h"
#include "weft/nn/mode.h"
#include "weft/nn/parameter_store.h"

namespace weft::models {

using blocks::Block;
using blocks::Function;
using blocks::Type;
using nlohmann::json;

namespace {

void collect_ids(const json& node, json& ids) {
  if (node.contains("id")) {
    ids.push_back(node["id"]);
    return;
  }
  for (const json& child : node["children"]) collect_ids(child, ids);
}

// A sentiment-form tree as {"label": root label, "ids": [word ids, left to right]}.
json flatten(const json& tree) {
  json ids = json::array();
  collect_ids(tree, ids);
  return json{{"label", tree.at("label")}, {"ids", std::move(ids)}};
}

}  // namespace

// Its registry entry: options hidden (128, the classifier's), attention_hidden (64), embeddings /
// no_embeddings (frozen GloVe unless there are none), embedding_dim, dropout (0.25), bad_records.
// Assets: the vocabulary.
ModelEntry attention_entry() {
  ModelEntry entry;
  entry.name = "attention";
  entry.summary =
      "feed-forward attention (Raffel & Ellis 2016) over SST sentences as word sequences";
  entry.input = "a bracketed SST tree or its JSON form (its words and root label are used)";
  entry.options = {
      {.name = "hidden",
       .default_value = 128,
       .help = "The classifier's hidden size",
       .min = 1,
       .max = 65536},
      {.name = "attention_hidden",
       .default_value = 64,
       .help = "Hidden size of the attention network a(h) = w . tanh(W h + b)",
       .min = 1,
       .max = 65536},
  };
  for (OptionSpec& spec : sst_options(0.25, "none")) entry.options.push_back(std::move(spec));
  entry.options.push_back({.name = "bad_records",
                           .kind = OptionKind::kString,
                           .default_value = "skip",
                           .help = "A sentence without words: skip (and list it) or reject",
                           .role = OptionRole::kData,
                           .choices = {"skip", "reject"}});
  entry.recipe = [](const OptionValues&) {
    return json{{"epochs", 15},
                {"batch_size", 25},
                {"optimizer", "adam"},
                {"learning_rate", 0.002},
                {"best_metric", "root_fine"}};
  };
  entry.create = [](const OptionValues& options, const ModelInit& init) {
    return std::make_unique<AttentionModel>(options, init);
  };
  return entry;
}

struct AttentionModel::Impl {
  SentimentData data;
  std::vector<std::string> skipped;
  std::int64_t dim = 0;
  float input_dropout = 0;
  std::unique_ptr<nn::Embedding> embedding;
  std::unique_ptr<nn::FC> attend, score, hidden, classifier;
};

AttentionModel::AttentionModel(const OptionValues& options, const ModelInit& init)
    : BlockModel(options, init), impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.data = load_sentiment_data(mutable_options(), init);
  const OptionValues& o = this->options();
  const char* names[3] = {"train", "dev", "test"};
  const std::vector<json>* trees[3] = {&m.data.train, &m.data.dev, &m.data.test};
  for (int s = 0; s < 3; ++s) {
    for (std::size_t i = 0; i < trees[s]->size(); ++i) {
      json sentence = flatten((*trees[s])[i]);
      if (!sentence["ids"].empty()) {
        split_examples(train::Split(s)).push_back(std::move(sentence));
        continue;
      }
      const std::string where = fmt::format("sst/{}.txt:{}", names[s], i + 1);
      if (o.text("bad_records") == "reject") fail("attention", where, ": a sentence without words");
      m.skipped.push_back(where + ": a sentence without words");
    }
  }
  m.data.train.clear();
  m.data.dev.clear();
  m.data.test.clear();
  m.dim = m.data.embedding_dim();
  m.input_dropout = float(o.number("dropout"));
  nn::ParameterStore& s = store();
  m.embedding = std::make_unique<nn::Embedding>(
      s, "embedding", m.data.vocabulary.size(), m.dim,
      nn::EmbeddingOptions{.init = nn::from_tensor(m.data.embeddings.matrix),
                           .trainable = o.flag("no_embeddings"),  // frozen GloVe otherwise
                           .mod_inputs = false});
  m.data.embeddings.matrix = Tensor();  // copied into the parameter
  m.attend = std::make_unique<nn::FC>(s, "attend", m.dim, o.integer("attention_hidden"),
                                      nn::FCOptions{.activation = nn::Activation::kTanh});
  m.score = std::make_unique<nn::FC>(s, "score", o.integer("attention_hidden"), 1,
                                     nn::FCOptions{.activation = nn::Activation::kNone});
  m.hidden = std::make_unique<nn::FC>(s, "hidden", m.dim, o.integer("hidden"),
                                      nn::FCOptions{.output_dropout = m.input_dropout});
  m.classifier = std::make_unique<nn::FC>(s, "classifier", o.integer("hidden"), kSstClasses,
                                          nn::FCOptions{.activation = nn::Activation::kNone});
  compile(make_blocks(), loom::Strategy::kAgenda);  // reaches the lower bound; by_depth does not
}

AttentionModel::~AttentionModel() = default;

// The model, as blocks. Output: (logits, the sequence of attention weights).
Block AttentionModel::make_blocks() {
  Impl* m = impl_.get();
  const std::int64_t dim = m->dim;
  const Type vec = Type::vector(dim), one = Type::vector(1);
  const Tensor ones = Tensor::full({1, dim}, 1.f).to(store().device());
  Block embed = blocks::Scalar(DType::kInt32) >>
                Function("embed", {Type::scalar(DType::kInt32)}, [m](std::span<const Var> in) {
                  return nn::mode_dropout((*m->embedding)(in[0]), m->input_dropout);
                });
  Block energy = Function("energy", {vec}, [m](std::span<const Var> in) {
    return (*m->score)((*m->attend)(in[0]));  // e_t = a(h_t), [1]
  });
  Block shifted_exp =
      Function("exp", {one, one}, [](std::span<const Var> in) { return exp(in[0] - in[1]); });
  Block normalize =
      Function("normalize", {one, one}, [](std::span<const Var> in) { return in[0] / in[1]; });
  Block weigh = Function("weigh", {one, vec}, [ones](std::span<const Var> in) {
    return matmul(in[0], in[0].tape().constant(ones)) * in[1];  // alpha_t h_t
  });
  Block classify = Function("classify", {vec}, [m](std::span<const Var> in) {
    return (*m->classifier)((*m->hidden)(in[0]));
  });

  blocks::Composition g("attention");
  auto h = g.add(blocks::GetItem("ids") >> blocks::Map(embed), g.input());
  auto e = g.add(blocks::Map(energy), h);
  auto e_max = g.add(blocks::Max() >> blocks::Broadcast(), e);  // for a stable softmax
  auto exp_e = g.add(blocks::ZipWith(shifted_exp), {e, e_max});
  auto total = g.add(blocks::Sum() >> blocks::Broadcast(), exp_e);
  auto alpha = g.add(blocks::ZipWith(normalize), {exp_e, total});
  auto context = g.add(blocks::ZipWith(weigh) >> blocks::Sum(), {alpha, h});
  auto logits = g.add(classify, context);
  g.add(blocks::Metric("root"), {logits, g.add(blocks::GetItem("label"), g.input())});
  g.set_output(std::vector{logits, alpha});
  return g;
}

train::BatchFigures AttentionModel::figures(const blocks::BatchResult& result,
                                            const train::Batch& /*batch*/, bool training) {
  const blocks::MetricValues roots = result.metric("root");
  train::BatchFigures figures = classify_examples(roots, training, nullptr);
  add_hits(figures.metrics, "root", roots.values.value(), int_labels(roots));
  return figures;
}

json AttentionModel::assets() const {
  return json{{"vocabulary", vocabulary_asset(impl_->data.vocabulary)}};
}

std::vector<std::string> AttentionModel::data_notes() const {
  std::vector<std::string> notes = coverage_notes(impl_->data, "attention");
  if (impl_->skipped.empty()) return notes;
  notes.push_back(fmt::format("attention: skipped {} bad records (--bad-records skip):",
                              impl_->skipped.size()));
  for (const std::string& record : impl_->skipped) notes.push_back("  " + record);
  return notes;
}

json AttentionModel::parse_example(std::string_view line, std::string_view where) const {
  return flatten(sentiment_example_from_text(line, where, impl_->data.vocabulary));
}

std::vector<json> AttentionModel::predictions(const blocks::BatchResult& result,
                                              std::size_t count) {
  const Tensor logits = result.output(0).value();
  const std::vector<float> values = logits.to_float_vector();
  const RowCalls calls = call_rows(logits);
  std::vector<json> predictions(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::span<const float> row(values.data() + i * kSstClasses, kSstClasses);
    predictions[i] = json{{"label", calls.fine[i]},
                          {"probabilities", probabilities_json(row)},
                          {"binary", calls.positive[i] ? "positive" : "negative"},
                          {"attention", json::array()}};
  }
  // One row per word, in order, tagged with its sentence.
  const std::vector<std::int32_t>& owner = result.output_examples(1);
  if (owner.empty()) return predictions;
  const std::vector<float> alpha = result.output(1).value().to_float_vector();
  for (std::size_t r = 0; r < owner.size(); ++r) {
    predictions[std::size_t(owner[r])]["attention"].push_back(alpha[r]);
  }
  return predictions;
}

const std::vector<std::string>& AttentionModel::skipped() const { return impl_->skipped; }

}  // namespace weft::models
