// The compiler on recursive models: one loom operation per Function block batched across all
// nodes, per-example outputs in input order, metrics with example indices and labels, the same
// results and gradients one example at a time and as a batch (and on several weaving threads),
// a finite-difference check, and a Child-Sum Tree-LSTM over n-ary trees via Map + Sum.
#include <cmath>

#include "blocks_test_util.h"

namespace weft::testing {
namespace {

const Type kHidden = Type::vector(3);

// A recursive tree model: leaves {"word": i} embed, nodes {"children": [l, r]} combine.
struct TreeModel {
  Parameter emb{"emb", random_tensor({4, 3}, 1)};
  Parameter w{"w", random_tensor({6, 3}, 2)};
  Parameter b{"b", random_tensor({3}, 3)};
  ForwardDeclaration fwd{Type::input(), kHidden};
  Block tree;

  explicit TreeModel(bool node_metric = false, bool collect = false) {
    Block leaf = GetItem("word") >> Scalar(DType::kInt32) >>
                 Function("leaf", {Type::scalar(DType::kInt32)}, [this](std::span<const Var> x) {
                   return embedding_lookup(emb, x[0].value());
                 });
    Block node = GetItem("children") >> Record({fwd(), fwd()}) >>
                 Function("node", {kHidden, kHidden}, [this](std::span<const Var> x) {
                   return tanh(linear(concat({x[0], x[1]}), w, b));
                 });
    if (node_metric) node = node >> AllOf({Identity(), Metric("nodes")}) >> GetItem(0);
    if (collect) node = node >> Collect("nodes");
    tree = OneOf([](const Input& x) { return Input(x.contains("word") ? "leaf" : "node"); },
                 {{"leaf", leaf}, {"node", node}});
    fwd.resolve_to(tree);
  }
  std::vector<Parameter> parameters() const { return {emb, w, b}; }
};

Input leaf(int word) { return {{"word", word}}; }
Input node(Input l, Input r) { return {{"children", {std::move(l), std::move(r)}}}; }

std::vector<Input> some_trees() {
  return {node(leaf(0), leaf(1)), leaf(2), node(node(leaf(3), leaf(0)), leaf(1)),
          node(leaf(1), node(leaf(2), node(leaf(3), leaf(3)))), node(leaf(2), leaf(2))};
}

// loss = sum(outputs * fixed weights), with gradients left in the parameters.
std::vector<float> run_and_backward(const Compiler& c, const std::vector<Input>& examples,
                                    const std::vector<Parameter>& params,
                                    std::vector<std::vector<float>>& grads) {
  for (Parameter p : params) p.zero_grad();
  Tape tape;
  BatchResult r = c.forward(examples, tape);
  Var out = r.output();
  tape.backward(sum(out * tape.constant(random_tensor(out.shape(), 77))));
  grads.clear();
  for (const Parameter& p : params) grads.push_back(p.grad().to_float_vector());
  return out.value().to_float_vector();
}

void expect_near(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << "element " << i;
}

TEST(BlocksCompiler, OneOperationPerFunctionBatchedAcrossNodes) {
  TreeModel m;
  Compiler c(m.tree);
  EXPECT_EQ(c.loom().num_operations(), 2u);  // leaf, node
  std::vector<Input> trees = some_trees();
  WovenBatch batch = c.weave(trees);
  EXPECT_EQ(batch.size(), 5u);
  EXPECT_EQ(batch.depth(), 4);  // the deepest tree: 3 node levels over a leaf call
  Tape tape;
  BatchResult r = c.run(batch, tape);
  EXPECT_EQ(r.output().shape(), (Shape{5, 3}));
  EXPECT_THAT(r.output_examples(), ElementsAre(0, 1, 2, 3, 4));
  // One batched call per depth for each operation: leaves at depth 1, nodes at 2..4.
  for (const auto& op : r.stats().operations) {
    if (op.name == "leaf") {
      EXPECT_EQ(op.batched_calls, 1);
    }
    if (op.name == "node") {
      EXPECT_EQ(op.batched_calls, 3);
      EXPECT_EQ(op.rows, 7);
    }
  }
  EXPECT_EQ(max_depth(m.tree, node(node(leaf(0), leaf(1)), leaf(2))), 3);
}

TEST(BlocksCompiler, BatchEqualsOneAtATimeInValuesAndGradients) {
  TreeModel m;
  Compiler c(m.tree);
  std::vector<Input> trees = some_trees();
  std::vector<std::vector<float>> batch_grads;
  std::vector<float> batched = run_and_backward(c, trees, m.parameters(), batch_grads);
  std::vector<std::vector<float>> sum_grads(m.parameters().size());
  for (std::size_t i = 0; i < trees.size(); ++i) {
    std::vector<std::vector<float>> grads;
    // The loss weights of example i are row i of the batch's weights.
    for (Parameter p : m.parameters()) p.zero_grad();
    Tape tape;
    BatchResult r = c.forward(std::vector<Input>{trees[i]}, tape);
    Var out = r.output();
    weft::Tensor weights = random_tensor({5, 3}, 77).rows_view(std::int64_t(i), 1).clone();
    tape.backward(sum(out * tape.constant(weights)));
    expect_near(out.value().to_float_vector(),
                std::vector<float>(batched.begin() + 3 * i, batched.begin() + 3 * i + 3), 1e-6f);
    EvalValue single = eval(m.tree, trees[i]);
    expect_near(floats(single), out.value().to_float_vector(), 1e-6f);
    for (std::size_t k = 0; k < sum_grads.size(); ++k) {
      auto g = m.parameters()[k].grad().to_float_vector();
      if (sum_grads[k].empty()) sum_grads[k].assign(g.size(), 0.0f);
      for (std::size_t j = 0; j < g.size(); ++j) sum_grads[k][j] += g[j];
    }
  }
  for (std::size_t k = 0; k < sum_grads.size(); ++k)
    expect_near(batch_grads[k], sum_grads[k], 1e-5f);
}

TEST(BlocksCompiler, FiniteDifferencesOfARecursiveModel) {
  TreeModel m;
  Compiler c(m.tree);
  std::vector<Input> trees{node(node(leaf(3), leaf(0)), leaf(1)), node(leaf(2), leaf(1))};
  std::vector<std::vector<float>> grads;
  run_and_backward(c, trees, m.parameters(), grads);
  auto loss = [&] {
    Tape tape;
    Var out = c.forward(trees, tape).output();
    return double(sum(out * tape.constant(random_tensor(out.shape(), 77))).value().item());
  };
  std::vector<Parameter> params = m.parameters();
  for (std::size_t k = 0; k < params.size(); ++k) {
    Tensor value = params[k].value();
    check_finite_differences(params[k].name(),
                             std::span(value.data<float>(), std::size_t(value.numel())), grads[k],
                             loss, /*step=*/1e-2, /*abs_tol=*/2e-3, /*rel_tol=*/0, /*stride=*/2);
  }
}

TEST(BlocksCompiler, ParallelWeavingKeepsInputOrder) {
  TreeModel m;
  std::vector<Input> trees;
  for (int rep = 0; rep < 3; ++rep)
    for (const Input& t : some_trees()) trees.push_back(t);
  CompilerOptions parallel;
  parallel.threads = 3;
  parallel.examples_per_thread = 2;
  Compiler serial_c(m.tree), parallel_c(m.tree, parallel);
  std::vector<std::vector<float>> g1, g2;
  auto a = run_and_backward(serial_c, trees, m.parameters(), g1);
  auto b = run_and_backward(parallel_c, trees, m.parameters(), g2);
  expect_near(a, b, 1e-6f);
  for (std::size_t k = 0; k < g1.size(); ++k) expect_near(g1[k], g2[k], 1e-5f);
}

// A batch woven by example ids (in place, as models weave their splits) is the batch of those
// examples copied out, on one weaving thread and on several; ids out of range are named.
TEST(BlocksCompiler, WeavingByIdsEqualsWeavingTheChosenExamples) {
  TreeModel m;
  const std::vector<Input> pool = some_trees();
  const std::vector<std::size_t> ids = {3, 0, 3, 4, 1, 2, 0};
  std::vector<Input> chosen;
  for (std::size_t id : ids) chosen.push_back(pool[id]);
  CompilerOptions parallel;
  parallel.threads = 3;
  parallel.examples_per_thread = 2;
  for (const CompilerOptions& options : {CompilerOptions{}, parallel}) {
    Compiler c(m.tree, options);
    Tape tape;
    const BatchResult by_id = c.forward(pool, ids, tape);
    const BatchResult copied = c.forward(chosen, tape);
    ASSERT_EQ(by_id.output().shape(), copied.output().shape());
    expect_near(by_id.output().value().to_float_vector(), copied.output().value().to_float_vector(),
                0.0f);
    EXPECT_EQ(by_id.output_examples(0), copied.output_examples(0));
  }
  Compiler c(m.tree);
  const std::vector<std::size_t> bad = {1, 5};
  EXPECT_THAT([&] { c.weave(pool, bad); },
              ::testing::ThrowsMessage<Error>(HasSubstr(
                  "example id 5 (position 1 of the batch) is out of range: there are 5 examples")));
}

TEST(BlocksCompiler, MetricsPerNodeAndLabelled) {
  TreeModel m(/*node_metric=*/true);
  Composition root;
  auto h = root.add(m.tree, root.input());
  auto label = root.add(GetItem("label"), root.input());
  root.add(Metric("root"), {h, label});
  root.set_output(h);
  Compiler c(root);
  std::vector<Input> trees = some_trees();
  for (std::size_t i = 0; i < trees.size(); ++i) trees[i]["label"] = int(i) * 10;
  Tape tape;
  BatchResult r = c.forward(trees, tape);
  EXPECT_THAT(r.metric_names(), ::testing::UnorderedElementsAre("nodes", "root"));
  MetricValues nodes = r.metric("nodes");
  EXPECT_EQ(nodes.values.shape(), (Shape{7, 3}));
  EXPECT_THAT(nodes.examples, ElementsAre(0, 2, 2, 3, 3, 3, 4));
  EXPECT_TRUE(nodes.labels.empty());
  MetricValues roots = r.metric("root");
  EXPECT_EQ(roots.rows(), 5u);
  EXPECT_EQ(roots.labels[3], Input(30));
  expect_near(roots.values.value().to_float_vector(), r.output().value().to_float_vector(), 0);
  // The root of tree 0 is its only node.
  expect_near(nodes.values.value().rows_view(0, 1).to_float_vector(),
              r.output().value().rows_view(0, 1).to_float_vector(), 0);
  EXPECT_THAT(error_of([&] { r.metric("loss"); }), HasSubstr("no metric named 'loss' (metrics: '"));
}

TEST(BlocksCompiler, CollectedNodeValuesReachLaterBlocksAndTheCaller) {
  TreeModel m(/*node_metric=*/false, /*collect=*/true);
  Composition root;
  auto h = root.add(m.tree, root.input());
  auto nodes = root.add(Collected("nodes", kHidden));
  auto count = root.add(Length(), nodes);  // a later block reading every node's value
  root.set_output({h, nodes, count});
  Compiler c(root);
  Tape tape;
  BatchResult r = c.forward(some_trees(), tape);
  ASSERT_EQ(r.num_outputs(), 3u);
  EXPECT_EQ(r.output(1).shape(), (Shape{7, 3}));
  EXPECT_THAT(r.output_examples(1), ElementsAre(0, 2, 2, 3, 3, 3, 4));
  EXPECT_THAT(r.output(2).value().to_float_vector(), ElementsAre(1, 0, 2, 3, 1));
  // The last node collected in each example is its root.
  expect_near(r.output(1).value().rows_view(2, 1).to_float_vector(),
              r.output(0).value().rows_view(2, 1).to_float_vector(), 0);
  Composition wrong;
  wrong.set_output(
      {wrong.add(Scalar() >> Collect("x"), wrong.input()), wrong.add(Collected("x", kHidden))});
  EXPECT_THAT(error_of([&] { Compiler bad(wrong); }),
              HasSubstr("collection 'x' is used with two types"));
}

TEST(BlocksCompiler, NestedForwardDeclarations) {
  // expr := number | {"items": list};  list := [expr, ...] summed. Mutually recursive.
  ForwardDeclaration expr(Type::input(), Type::scalar());
  ForwardDeclaration list(Type::input(), Type::scalar());
  Block expr_block = OneOf([](const Input& x) { return Input(x.is_number()); },
                           {{true, Scalar()}, {false, GetItem("items") >> list()}});
  Block list_block = Map(expr()) >> Sum();
  expr.resolve_to(expr_block);
  list.resolve_to(list_block);
  Input nested = {{"items", {1, {{"items", {2, 3}}}, {{"items", Input::array()}}, 4}}};
  EXPECT_THAT(floats(eval(expr_block, nested)), ElementsAre(10));
  // Depth: the inner sum (2, 3) is 1 call, the outer sum of 4 elements 2 more.
  EXPECT_EQ(max_depth(expr_block, nested), 3);
  EXPECT_THAT(floats(eval(expr_block, 7)), ElementsAre(7));
  Compiler c(expr_block);
  Tape tape;
  std::vector<Input> examples{nested, 7, {{"items", {1, 1}}}};
  EXPECT_THAT(c.forward(examples, tape).output().value().to_float_vector(), ElementsAre(10, 7, 2));
}

TEST(BlocksCompiler, RoutingBlocksAndMetricsAddNoDepth) {
  Block f = Function("inc", {Type::scalar()}, [](std::span<const Var> x) { return x[0] + 1.0f; });
  Input rec = {{"a", 1}, {"b", nullptr}};
  EXPECT_EQ(max_depth(Record({{"a", Scalar() >> f}, {"b", Optional(Scalar())}}) >> GetItem(0), rec),
            1);
  EXPECT_EQ(max_depth(GetItem("a") >> Scalar() >> f >> AllOf({Identity(), Metric("m")}), rec), 1);
  Block one_of = OneOf([](const Input&) { return Input(0); }, {Scalar() >> f});
  EXPECT_EQ(max_depth(GetItem("a") >> one_of, {{"a", 2}}), 1);
  EXPECT_EQ(max_depth(Map(Scalar()) >> RNN(Function("step", {Type::scalar(), Type::scalar()},
                                                    [](std::span<const Var> x) {
                                                      return std::vector<Var>{x[0], x[0] + x[1]};
                                                    })),
                      {1, 2, 3}),
            3);  // one call per element
}

TEST(BlocksCompiler, SequenceOutputsGiveRowsPerElement) {
  Block twice =
      Function("twice", {Type::vector(2)}, [](std::span<const Var> x) { return x[0] * 2.0f; });
  Compiler c(Map(Vector(2) >> twice));
  std::vector<Input> examples{{{1, 2}, {3, 4}, {5, 6}}, Input::array(), {{7, 8}}};
  Tape tape;
  BatchResult r = c.forward(examples, tape);
  EXPECT_THAT(r.output_examples(), ElementsAre(0, 0, 0, 2));
  EXPECT_THAT(r.output().value().to_float_vector(), ElementsAre(2, 4, 6, 8, 10, 12, 14, 16));
}

// ---- Child-Sum Tree-LSTM over n-ary trees ------------------------------------------------

struct ChildSum {
  Parameter wf{"wf", random_tensor({2, 3}, 11)}, uf{"uf", random_tensor({3, 3}, 12)};
  Parameter bf{"bf", random_tensor({3}, 13)};
  Parameter w{"w", random_tensor({2, 9}, 14)}, u{"u", random_tensor({3, 9}, 15)};
  Parameter b{"b", random_tensor({9}, 16)};

  // sigmoid(x Wf + h Uf + bf) * c, per child.
  Var forget(Var x, Var h, Var c) const { return sigmoid(linear(x, wf, bf) + matmul(h, uf)) * c; }
  std::pair<Var, Var> update(Var x, Var h_sum, Var fc_sum) const {
    auto [i, o, g] = split<3>(linear(x, w, b) + matmul(h_sum, u));
    Var c = sigmoid(i) * tanh(g) + fc_sum;
    return {sigmoid(o) * tanh(c), c};
  }
  // The same model computed directly on a tape, one node at a time.
  std::pair<Var, Var> reference(Tape& tape, const Input& tree) const {
    std::vector<float> xs = tree["x"].get<std::vector<float>>();
    Var x = tape.constant(weft::Tensor::from_vector({1, 2}, xs));
    Var h_sum = tape.constant(weft::Tensor::zeros({1, 3}));
    Var fc_sum = h_sum;
    for (const Input& child : tree["children"]) {
      auto [h, c] = reference(tape, child);
      h_sum = h_sum + h;
      fc_sum = fc_sum + forget(x, h, c);
    }
    return update(x, h_sum, fc_sum);
  }
};

TEST(BlocksCompiler, ChildSumTreeLstmOverVariableArityTrees) {
  ChildSum cell;
  const Type state = Type::tuple({kHidden, kHidden});
  Function forget("forget", {Type::vector(2), state},
                  [&cell](std::span<const Var> in) { return cell.forget(in[0], in[1], in[2]); });
  Function update("update", {Type::vector(2), kHidden, kHidden}, [&cell](std::span<const Var> in) {
    auto [h, c] = cell.update(in[0], in[1], in[2]);
    return std::vector<Var>{h, c};
  });
  ForwardDeclaration fwd(Type::input(), state);
  Composition n("child_sum");
  auto x = n.add(GetItem("x") >> Vector(2), n.input());
  auto kids = n.add(GetItem("children") >> Map(fwd()), n.input());
  auto xb = n.add(Broadcast(), x);
  auto fc_sum = n.add(ZipWith(forget) >> Sum(), {xb, kids});
  auto h_sum = n.add(Map(GetItem(0)) >> Sum(), kids);
  n.set_output(n.add(update, {x, h_sum, fc_sum}));
  fwd.resolve_to(n);
  Compiler c(n >> GetItem(0));

  auto t = [](float a, std::vector<Input> children) {
    return Input{{"x", {a, -a}}, {"children", children}};
  };
  std::vector<Input> trees{t(0.5f, {}), t(0.1f, {t(0.2f, {}), t(0.3f, {}), t(-0.4f, {})}),
                           t(1.0f, {t(0.7f, {t(0.2f, {})}), t(-0.1f, {})})};
  Tape tape;
  BatchResult r = c.forward(trees, tape);
  ASSERT_EQ(r.output().shape(), (Shape{3, 3}));
  for (std::size_t i = 0; i < trees.size(); ++i) {
    Tape ref_tape;
    TapeScope scope(ref_tape);
    auto [h, cc] = cell.reference(ref_tape, trees[i]);
    expect_near(r.output().value().rows_view(std::int64_t(i), 1).to_float_vector(),
                h.value().to_float_vector(), 1e-5f);
  }
}

}  // namespace
}  // namespace weft::testing
