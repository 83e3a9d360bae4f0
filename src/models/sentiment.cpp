// The SST Tree-LSTM (Tai et al. 2015) with blocks: the model definition (make_blocks), its
// batches (weave ahead, run, loss over every node, accuracies) and predictions. Data loading
// and the example format live in sentiment_data.cpp.
#include "weft/models/sentiment.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "sentiment_data.h"
#include "weft/autodiff/ops.h"
#include "weft/blocks/compiler.h"
#include "weft/core/error.h"
#include "weft/models/blocks_runner.h"
#include "weft/nn/cells.h"
#include "weft/nn/embedding.h"
#include "weft/nn/fc.h"
#include "weft/nn/initializers.h"
#include "weft/nn/mode.h"
#include "weft/nn/parameter_store.h"

namespace weft::models {

using blocks::Block;
using blocks::Composition;
using blocks::Function;
using blocks::Type;
using nlohmann::json;

namespace {

constexpr int kClasses = kSstClasses;

}  // namespace

struct SentimentModel::Impl {
  SentimentOptions options;
  SentimentData data;
  nn::ParameterStore store;
  std::unique_ptr<nn::Embedding> embedding;
  Parameter leaf_weight, leaf_bias;
  std::unique_ptr<nn::NaryTreeLSTMCell> composer;
  std::unique_ptr<nn::FC> classifier;
  Block node;  // kept alive: the forward declaration's references hold it weakly
  BlocksRunner runner;

  explicit Impl(SentimentOptions opts)
      : options(std::move(opts)), data(load_sentiment_data(options)), store(options.seed) {
    make_layers();
    runner.compile(make_blocks(), blocks::CompilerOptions{.threads = options.weave_threads});
  }

  void make_layers() {
    const std::int64_t dim = data.embeddings.matrix.shape()[1];
    const std::int64_t hidden = options.hidden;
    embedding = std::make_unique<nn::Embedding>(
        store, "embedding", data.vocabulary.size(), dim,
        nn::EmbeddingOptions{.init = nn::from_tensor(data.embeddings.matrix),
                             .trainable = options.train_embeddings,
                             .mod_inputs = false});
    // Tai et al.'s leaf module: c = W_c x + b_c, h = sigmoid(W_o x + b_o) * tanh(c).
    leaf_weight = store.create("leaf/weight", {dim, 2 * hidden}, nn::glorot_uniform());
    leaf_bias = store.create("leaf/bias", {2 * hidden}, nn::zeros());
    composer = std::make_unique<nn::NaryTreeLSTMCell>(
        store, "composer", 0, hidden, 2,
        nn::CellOptions{.recurrent_dropout = options.recurrent_dropout});
    classifier = std::make_unique<nn::FC>(store, "classifier", hidden, kClasses,
                                          nn::FCOptions{.activation = nn::Activation::kNone,
                                                        .input_dropout = options.output_dropout});
  }

  // The model, as blocks: a node is a leaf (word -> state) or a pair of nodes (-> state); every
  // node reports its logits and label to the metric "nodes"; the root to "root" as well.
  Block make_blocks() {
    const Type vec = Type::vector(options.hidden);
    const Type state = Type::tuple({vec, vec});  // (h, c)
    blocks::ForwardDeclaration tree(Type::input(), state);

    Block leaf = blocks::GetItem("id") >> blocks::Scalar(DType::kInt32) >>
                 Function("leaf", {Type::scalar(DType::kInt32)}, [this](std::span<const Var> in) {
                   Var x = nn::mode_dropout((*embedding)(in[0]), options.input_dropout);
                   auto [c, o] = split<2>(linear(x, leaf_weight, leaf_bias));
                   return std::vector<Var>{sigmoid(o) * tanh(c), c};
                 });
    Block pair = blocks::GetItem("children") >>
                 blocks::Record(std::vector<Block>{tree(), tree()}) >>
                 Function("composer", {state, state}, [this](std::span<const Var> in) {
                   auto [h, c] = (*composer)(Var(), {in[0], in[2]}, {in[1], in[3]});
                   return std::vector<Var>{h, c};
                 });
    Block logits = Function("logits", {state},
                            [this](std::span<const Var> in) { return (*classifier)(in[0]); });
    auto is_pair = [](const blocks::Input& x) { return blocks::Input(x.contains("children")); };

    Composition node_graph("sst_node");
    auto node_state =
        node_graph.add(blocks::OneOf(is_pair, {{false, leaf}, {true, pair}}), node_graph.input());
    auto label = node_graph.add(blocks::GetItem("label"), node_graph.input());
    node_graph.add(blocks::Metric("nodes"), {node_graph.add(logits, node_state), label});
    node_graph.set_output(node_state);
    node = node_graph;
    tree.resolve_to(node);

    Composition graph("sentiment");
    auto root_state = graph.add(tree(), graph.input());
    auto root_logits = graph.add(logits, root_state);
    graph.add(blocks::Metric("root"),
              {root_logits, graph.add(blocks::GetItem("label"), graph.input())});
    graph.set_output(root_logits);
    return graph;
  }

  // Runs a batch; with `training`, backpropagates the mean over trees of each tree's summed
  // node losses.
  train::BatchFigures run(const train::Batch& batch, bool training, Rng* rng) {
    blocks::BatchResult result = runner.run(batch, data.split(batch.split), training, rng);
    const blocks::MetricValues nodes = result.metric("nodes");
    const blocks::MetricValues roots = result.metric("root");
    const MetricLoss loss = metric_cross_entropy(nodes);
    const auto trees = float(batch.example_ids.size());
    if (training) loss.sum.tape().backward(loss.sum * (1.f / trees));

    train::BatchFigures figures;
    figures.loss_sum = loss.sum.value().item();
    figures.examples = std::int64_t(batch.example_ids.size());
    figures.metrics.add_mean("node_loss", figures.loss_sum / double(loss.rows), double(loss.rows));
    add_hits(figures.metrics, "all", nodes.values.value(), int_labels(nodes));
    add_hits(figures.metrics, "root", roots.values.value(), int_labels(roots));
    return figures;
  }
};

SentimentModel::SentimentModel(SentimentOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
SentimentModel::~SentimentModel() = default;

std::string SentimentModel::config_json() const {
  const SentimentOptions& o = impl_->options;
  return json{{"hidden", o.hidden},
              {"embedding_dim", impl_->data.embeddings.matrix.shape()[1]},
              {"vocabulary", impl_->data.vocabulary.size()},
              {"input_dropout", o.input_dropout},
              {"output_dropout", o.output_dropout},
              {"recurrent_dropout", o.recurrent_dropout},
              {"train_embeddings", o.train_embeddings},
              {"embeddings", o.embeddings_path}}
      .dump();
}

std::vector<Parameter> SentimentModel::parameters() { return impl_->store.parameters(); }

std::size_t SentimentModel::num_examples(train::Split split) const {
  return impl_->data.split(split).size();
}

train::BatchFigures SentimentModel::train_batch(const train::Batch& batch, Rng& rng) {
  return impl_->run(batch, true, &rng);
}

train::BatchFigures SentimentModel::eval_batch(const train::Batch& batch) {
  return impl_->run(batch, false, nullptr);
}

std::unique_ptr<train::PreparedBatch> SentimentModel::prepare_batch(
    train::Split split, std::span<const std::size_t> ids) {
  return impl_->runner.prepare(impl_->data.split(split), ids);
}

json SentimentModel::parse_example(std::string_view line, std::string_view where) const {
  return sentiment_example_from_text(line, where, impl_->data.vocabulary);
}

std::vector<json> SentimentModel::predict(std::span<const json> examples) {
  blocks::BatchResult result = impl_->runner.infer(examples);
  const Tensor logits = result.output(0).value();
  const std::vector<float> values = logits.to_float_vector();
  const RowCalls calls = call_rows(logits);
  std::vector<json> predictions;
  for (std::size_t i = 0; i < examples.size(); ++i) {
    const std::span<const float> row(values.data() + i * kClasses, kClasses);
    predictions.push_back(json{{"label", calls.fine[i]},
                               {"probabilities", probabilities_json(row)},
                               {"binary", calls.positive[i] ? "positive" : "negative"}});
  }
  return predictions;
}

const Block& SentimentModel::root_block() const { return impl_->runner.root(); }

std::span<const json> SentimentModel::examples(train::Split split) const {
  return impl_->data.split(split);
}

std::int64_t SentimentModel::vectors_found() const { return impl_->data.embeddings.coverage.found; }
std::int64_t SentimentModel::vocabulary_size() const {
  return impl_->data.embeddings.coverage.total;
}

}  // namespace weft::models
