// The nn layers as blocks: each adapter gives the same values as calling the layer directly on
// a tape, one operation shared by every node that uses it (RNN steps, tree nodes).
#include "blocks_test_util.h"
#include "weft/blocks/layers.h"
#include "weft/nn/parameter_store.h"

namespace weft::testing {
namespace {

std::vector<float> direct(const std::function<Var(Tape&)>& f) {
  Tape tape;
  TapeScope scope(tape);
  return f(tape).value().to_float_vector();
}

Var row(Tape& tape, std::vector<float> values) {
  return tape.constant(weft::Tensor::from_vector({1, std::int64_t(values.size())}, values));
}

void expect_near(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5f) << "element " << i;
}

TEST(BlocksLayers, FCAndEmbedding) {
  nn::ParameterStore store(3);
  nn::FCOptions tanh_fc;
  tanh_fc.activation = nn::Activation::kTanh;
  nn::FC fc(store, "fc", 3, 2, tanh_fc);
  FCBlock block(fc);
  EXPECT_EQ(*block.output_type(), Type::vector(2));
  expect_near(floats(eval(Vector(3) >> block, {1, 2, 3})), direct([&](Tape& t) {
                return fc(row(t, {1, 2, 3}));
              }));
  nn::Embedding emb(store, "emb", 5, 4);
  std::vector<float> table = emb.table().value().to_float_vector();
  expect_near(floats(eval(Scalar(DType::kInt32) >> EmbeddingBlock(emb), 7)),
              std::vector<float>(table.begin() + 8, table.begin() + 12));  // 7 mod 5 = 2
}

TEST(BlocksLayers, LstmAndGruStepsInAnRnn) {
  nn::ParameterStore store(4);
  nn::LSTMCell lstm(store, "lstm", 2, 3);
  Block rnn = Map(Vector(2)) >> RNN(LSTMBlock(lstm));
  EvalValue v = eval(rnn, {{1, 0}, {0, 1}, {-1, 2}});
  expect_near(floats(v[1][0]), direct([&](Tape& t) {
                Var h = t.constant(weft::Tensor::zeros({1, 3})), c = h;
                for (auto x : {std::vector<float>{1, 0}, {0, 1}, {-1, 2}})
                  std::tie(h, c) = lstm(row(t, x), h, c);
                return h;
              }));
  EXPECT_EQ(max_depth(rnn, {{1, 0}, {0, 1}, {-1, 2}}), 3);
  nn::GRUCell gru(store, "gru", 2, 3);
  EvalValue g = eval(Map(Vector(2)) >> RNN(GRUBlock(gru)), {{1, 0}, {0, 1}});
  expect_near(floats(g[1]), direct([&](Tape& t) {
                Var h = t.constant(weft::Tensor::zeros({1, 3}));
                for (auto x : {std::vector<float>{1, 0}, {0, 1}}) h = gru(row(t, x), h);
                return h;
              }));
}

TEST(BlocksLayers, BinaryTreeLstmSharedAtEveryNode) {
  nn::ParameterStore store(5);
  nn::NaryTreeLSTMCell cell(store, "tree", 2, 3, 2);
  TreeLSTMBlock block(cell);
  const Type state = Type::tuple({Type::vector(3), Type::vector(3)});
  ForwardDeclaration fwd(Type::input(), state);
  Block leaf = AllOf({Vector(2), Zeros(state), Zeros(state)}) >> block;
  Block node =
      AllOf({GetItem("x") >> Vector(2), GetItem("l") >> fwd(), GetItem("r") >> fwd()}) >> block;
  Block tree =
      OneOf([](const Input& x) { return Input(x.is_array()); }, {{true, leaf}, {false, node}});
  fwd.resolve_to(tree);
  Input t = {
      {"x", {0.5, -0.5}}, {"l", {1, 2}}, {"r", {{"x", {0, 1}}, {"l", {3, 4}}, {"r", {5, 6}}}}};
  Compiler compiler(tree >> GetItem(0));
  EXPECT_EQ(compiler.loom().num_operations(), 1u);  // one cell for leaves and nodes
  Tape tape;
  std::vector<Input> examples{t};
  BatchResult r = compiler.forward(examples, tape);
  expect_near(r.output().value().to_float_vector(), direct([&](Tape& tp) {
                Var z = tp.constant(weft::Tensor::zeros({1, 3}));
                auto leaf_of = [&](std::vector<float> x) {
                  return cell(row(tp, x), {z, z}, {z, z});
                };
                auto [h3, c3] = leaf_of({3, 4});
                auto [h5, c5] = leaf_of({5, 6});
                auto [hr, cr] = cell(row(tp, {0, 1}), {h3, h5}, {c3, c5});
                auto [h1, c1] = leaf_of({1, 2});
                return cell(row(tp, {0.5f, -0.5f}), {h1, hr}, {c1, cr}).first;
              }));
}

TEST(BlocksLayers, ChildSumPieces) {
  nn::ParameterStore store(6);
  nn::ChildSumTreeLSTMCell cell(store, "cs", 2, 3);
  ChildSumForgetBlock forget(cell);
  ChildSumNodeBlock node(cell);
  const Type state = Type::tuple({Type::vector(3), Type::vector(3)});
  EXPECT_EQ(*forget.input_type(), Type::tuple({Type::vector(2), state}));
  EXPECT_EQ(*node.output_type(), state);
  EvalValue v =
      eval(Record({Vector(2), Vector(3), Vector(3)}) >> node, {{1, 2}, {0, 0, 0}, {0, 0, 0}});
  expect_near(floats(v[0]), direct([&](Tape& t) {
                Var z = t.constant(weft::Tensor::zeros({1, 3}));
                return cell.node(row(t, {1, 2}), z, z).first;
              }));
}

}  // namespace
}  // namespace weft::testing
