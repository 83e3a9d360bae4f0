// A binary Tree-LSTM (Tai et al. 2015) on Stanford Sentiment Treebank trees, written with blocks:
// a ForwardDeclaration recursion, OneOf for leaf vs node, one cell Function per kind of node
// (each ONE loom operation batched over every node of every tree), and a labelled Metric per
// node for the 5-class loss. Trains a few steps of plain SGD on a few hundred trees.
//   tree_lstm_sst [path/to/train.txt] [trees] [steps]
// The trees come from weft/io/sst.h, as Input values {"label", "word"} / {"label", "children"}.
#include <chrono>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "weft/autodiff/ops.h"
#include "weft/blocks/compiler.h"
#include "weft/core/rng.h"
#include "weft/io/sst.h"
#include "weft/io/sst_json.h"

using namespace weft;
using namespace weft::blocks;

namespace {

Tensor uniform(const Shape& shape, float scale, Rng& rng) {
  std::vector<float> v(std::size_t(shape.numel()));
  for (float& x : v) x = rng.uniform(-scale, scale);
  return Tensor::from_vector(shape, v);
}

}  // namespace

int run(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "../shared/data/sst/train.txt";
  const std::size_t num_trees = argc > 2 ? std::stoul(argv[2]) : 300;
  const int steps = argc > 3 ? std::stoi(argv[3]) : 8;
  std::vector<Input> trees;
  for (const io::SstTree& t : io::read_sst_file(path)) {
    if (trees.size() == num_trees) break;
    trees.push_back(io::to_input(t));
  }
  std::map<std::string, int> vocab;
  std::function<void(const Input&)> add_words = [&](const Input& t) {
    if (t.contains("word"))
      vocab.emplace(t["word"].get<std::string>(), int(vocab.size()));
    else
      for (const Input& c : t["children"]) add_words(c);
  };
  for (const Input& t : trees) add_words(t);

  // ---- The model: ~40 lines of blocks -----------------------------------------------------
  const std::int64_t D = 64, N = 64, V = std::int64_t(vocab.size());
  Rng rng(7);
  Parameter emb("embedding", uniform({V, D}, 0.1f, rng));
  Parameter wx("leaf/w", uniform({D, 3 * N}, 0.1f, rng)), bx("leaf/b", Tensor::zeros({3 * N}));
  Parameter wh("node/w", uniform({2 * N, 5 * N}, 0.1f, rng)), bh("node/b", Tensor::zeros({5 * N}));
  Parameter wo("out/w", uniform({N, 5}, 0.1f, rng)), bo("out/b", Tensor::zeros({5}));
  const Type state = Type::tuple({Type::vector(N), Type::vector(N)});  // (h, c)

  Function embed("embed", {Type::scalar(DType::kInt32)},
                 [&](std::span<const Var> id) { return embedding_lookup(emb, id[0].value()); });
  Function leaf_cell("leaf_cell", {Type::vector(D)}, [&](std::span<const Var> x) {
    auto [i, o, u] = split<3>(linear(x[0], wx, bx));
    Var c = sigmoid(i) * tanh(u);
    return std::vector<Var>{sigmoid(o) * tanh(c), c};
  });
  Function node_cell("node_cell", {state, state}, [&](std::span<const Var> s) {  // hl cl hr cr
    auto [i, fl, fr, o, u] = split<5>(linear(concat({s[0], s[2]}), wh, bh));
    Var c = sigmoid(i) * tanh(u) + sigmoid(fl) * s[1] + sigmoid(fr) * s[3];
    return std::vector<Var>{sigmoid(o) * tanh(c), c};
  });
  Function logits("logits", {Type::vector(N)},
                  [&](std::span<const Var> h) { return linear(h[0], wo, bo); });
  auto word_id = [&](const Input& w) { return Input(vocab.at(w.get<std::string>())); };

  ForwardDeclaration tree(Type::input(), state);
  Block leaf = GetItem("word") >> InputTransform(word_id, "word_id") >> Scalar(DType::kInt32) >>
               embed >> leaf_cell;
  Block node = GetItem("children") >> Record({tree(), tree()}) >> node_cell;
  Composition labelled;  // each node: its state, plus (logits, gold label) as a metric row
  auto s = labelled.add(OneOf([](const Input& t) { return Input(t.contains("word")); },
                              {{true, leaf}, {false, node}}),
                        labelled.input());
  auto y = labelled.add(GetItem(0) >> logits, s);
  labelled.add(Metric("logits"), {y, labelled.add(GetItem("label"), labelled.input())});
  labelled.set_output(s);
  tree.resolve_to(labelled);
  Compiler compiler(tree() >> GetItem(0));
  // -------------------------------------------------------------------------------------------

  const std::vector<Parameter> params{emb, wx, bx, wh, bh, wo, bo};
  const float learning_rate = 0.5f;
  std::printf("%zu trees, %lld words, %zu loom operations\n", trees.size(), (long long)V,
              compiler.loom().num_operations());
  Tape tape;
  for (int step = 0; step < steps; ++step) {
    tape.clear();
    for (Parameter p : params) p.zero_grad();
    const auto start = std::chrono::steady_clock::now();
    WovenBatch batch = compiler.weave(trees);
    const double weave_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    BatchResult result = compiler.run(batch, tape);
    MetricValues rows = result.metric("logits");
    std::vector<std::int32_t> labels;
    for (const Input& l : rows.labels) labels.push_back(l.get<std::int32_t>());
    Var loss = mean(softmax_cross_entropy(
        rows.values, Tensor::from_vector({std::int64_t(labels.size())}, labels)));
    tape.backward(loss);
    for (Parameter p : params) {  // plain SGD
      float* value = p.value().data<float>();
      const float* grad = p.grad().data<float>();
      for (std::int64_t k = 0; k < p.value().numel(); ++k) value[k] -= learning_rate * grad[k];
    }
    std::printf(
        "step %d  loss %.4f  (%zu nodes, depth %d, woven in %.1f ms = %.2fM loom calls/s)\n", step,
        loss.value().item(), rows.rows(), batch.depth(), weave_s * 1e3,
        double(batch.weaver().num_calls()) / weave_s / 1e6);
  }
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n(usage: tree_lstm_sst [path/to/sst/train.txt] [trees] [steps])\n",
                 e.what());
    return 1;
  }
}
