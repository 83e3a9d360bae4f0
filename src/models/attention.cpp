// Feed-forward attention over SST sentences with blocks: the model definition (make_blocks:
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
#include "weft/models/blocks_runner.h"
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

SentimentOptions loader_options(const AttentionOptions& o) {
  SentimentOptions s;
  s.data_dir = o.data_dir;
  s.embeddings_path = o.embeddings_path;
  s.embedding_dim = o.embedding_dim;
  s.seed = o.seed;
  s.max_train_trees = o.max_train_trees;
  s.max_eval_trees = o.max_eval_trees;
  return s;
}

}  // namespace

struct AttentionModel::Impl {
  AttentionOptions options;
  SentimentData data;
  std::vector<json> splits[3];  // train, dev, test as flat sentences
  std::vector<std::string> skipped;
  nn::ParameterStore store;
  std::unique_ptr<nn::Embedding> embedding;
  std::unique_ptr<nn::FC> attend, score, hidden, classifier;
  BlocksRunner runner;

  explicit Impl(AttentionOptions opts)
      : options(std::move(opts)),
        data(load_sentiment_data(loader_options(options))),
        store(options.seed) {
    const char* names[3] = {"train", "dev", "test"};
    const std::vector<json>* trees[3] = {&data.train, &data.dev, &data.test};
    for (int s = 0; s < 3; ++s) {
      for (std::size_t i = 0; i < trees[s]->size(); ++i) {
        json sentence = flatten((*trees[s])[i]);
        if (!sentence["ids"].empty()) {
          splits[s].push_back(std::move(sentence));
          continue;
        }
        const std::string where = fmt::format("sst/{}.txt:{}", names[s], i + 1);
        if (!options.skip_bad_records) fail("attention", where, ": a sentence without words");
        skipped.push_back(where + ": a sentence without words");
      }
    }
    make_layers();
    runner.compile(make_blocks(), blocks::CompilerOptions{.threads = options.weave_threads});
  }

  void make_layers() {
    const std::int64_t dim = data.embeddings.matrix.shape()[1];
    embedding = std::make_unique<nn::Embedding>(
        store, "embedding", data.vocabulary.size(), dim,
        nn::EmbeddingOptions{.init = nn::from_tensor(data.embeddings.matrix),
                             .trainable = options.train_embeddings,
                             .mod_inputs = false});
    attend = std::make_unique<nn::FC>(store, "attend", dim, options.attention_hidden,
                                      nn::FCOptions{.activation = nn::Activation::kTanh});
    score = std::make_unique<nn::FC>(store, "score", options.attention_hidden, 1,
                                     nn::FCOptions{.activation = nn::Activation::kNone});
    hidden = std::make_unique<nn::FC>(store, "hidden", dim, options.hidden,
                                      nn::FCOptions{.output_dropout = options.output_dropout});
    classifier = std::make_unique<nn::FC>(store, "classifier", options.hidden, kSstClasses,
                                          nn::FCOptions{.activation = nn::Activation::kNone});
  }

  // The model, as blocks. Output: (logits, the sequence of attention weights).
  Block make_blocks() {
    const std::int64_t dim = data.embeddings.matrix.shape()[1];
    const Type vec = Type::vector(dim), one = Type::vector(1);
    const Tensor ones = Tensor::full({1, dim}, 1.f);
    Block embed = blocks::Scalar(DType::kInt32) >>
                  Function("embed", {Type::scalar(DType::kInt32)}, [this](std::span<const Var> in) {
                    return nn::mode_dropout((*embedding)(in[0]), options.input_dropout);
                  });
    Block energy = Function("energy", {vec}, [this](std::span<const Var> in) {
      return (*score)((*attend)(in[0]));  // e_t = a(h_t), [1]
    });
    Block shifted_exp =
        Function("exp", {one, one}, [](std::span<const Var> in) { return exp(in[0] - in[1]); });
    Block normalize =
        Function("normalize", {one, one}, [](std::span<const Var> in) { return in[0] / in[1]; });
    Block weigh = Function("weigh", {one, vec}, [ones](std::span<const Var> in) {
      return matmul(in[0], in[0].tape().constant(ones)) * in[1];  // alpha_t h_t
    });
    Block classify = Function("classify", {vec}, [this](std::span<const Var> in) {
      return (*classifier)((*hidden)(in[0]));
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

  train::BatchFigures run(const train::Batch& batch, bool training, Rng* rng) {
    blocks::BatchResult result = runner.run(batch, splits[int(batch.split)], training, rng);
    const blocks::MetricValues roots = result.metric("root");
    train::BatchFigures figures = classify_examples(roots, training, nullptr);
    add_hits(figures.metrics, "root", roots.values.value(), int_labels(roots));
    return figures;
  }
};

AttentionModel::AttentionModel(AttentionOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
AttentionModel::~AttentionModel() = default;

std::string AttentionModel::config_json() const {
  const AttentionOptions& o = impl_->options;
  return json{{"hidden", o.hidden},
              {"attention_hidden", o.attention_hidden},
              {"embedding_dim", impl_->data.embeddings.matrix.shape()[1]},
              {"vocabulary", impl_->data.vocabulary.size()},
              {"input_dropout", o.input_dropout},
              {"output_dropout", o.output_dropout},
              {"train_embeddings", o.train_embeddings},
              {"embeddings", o.embeddings_path}}
      .dump();
}

std::vector<Parameter> AttentionModel::parameters() { return impl_->store.parameters(); }

std::size_t AttentionModel::num_examples(train::Split split) const {
  return impl_->splits[int(split)].size();
}

train::BatchFigures AttentionModel::train_batch(const train::Batch& batch, Rng& rng) {
  return impl_->run(batch, true, &rng);
}

train::BatchFigures AttentionModel::eval_batch(const train::Batch& batch) {
  return impl_->run(batch, false, nullptr);
}

std::unique_ptr<train::PreparedBatch> AttentionModel::prepare_batch(
    train::Split split, std::span<const std::size_t> ids) {
  return impl_->runner.prepare(impl_->splits[int(split)], ids);
}

json AttentionModel::parse_example(std::string_view line, std::string_view where) const {
  return flatten(sentiment_example_from_text(line, where, impl_->data.vocabulary));
}

std::vector<json> AttentionModel::predict(std::span<const json> examples) {
  blocks::BatchResult result = impl_->runner.infer(examples);
  const Tensor logits = result.output(0).value();
  const std::vector<float> values = logits.to_float_vector();
  const RowCalls calls = call_rows(logits);
  std::vector<json> predictions(examples.size());
  for (std::size_t i = 0; i < examples.size(); ++i) {
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

const Block& AttentionModel::root_block() const { return impl_->runner.root(); }

std::span<const json> AttentionModel::examples(train::Split split) const {
  return impl_->splits[int(split)];
}

const std::vector<std::string>& AttentionModel::skipped() const { return impl_->skipped; }

}  // namespace weft::models
