// The sequence blocks on concrete inputs: Map, Fold (depth n), Reduce (balanced pairing, odd
// element carried, depth ceil(log2 n)), Sum/Min/Max/Mean (zero on []), Sum in order (one call,
// depth 1), RNN, Broadcast with Zip, NGrams and Nth.
#include "blocks_test_util.h"

namespace weft::testing {
namespace {

Input range(int n) {
  Input a = Input::array();
  for (int i = 1; i <= n; ++i) a.push_back(i);
  return a;
}

TEST(BlocksSequence, MapEvaluatesEachElement) {
  Block b = Map(Scalar() >> Function("sq", {Type::scalar()},
                                     [](std::span<const Var> x) { return x[0] * x[0]; }));
  EXPECT_EQ(*b.output_type(), Type::sequence(Type::scalar()));
  EvalValue v = eval(b, {1, 2, 3});
  ASSERT_EQ(v.size(), 3u);
  EXPECT_THAT(floats(v[2]), ElementsAre(9));
  EXPECT_EQ(max_depth(b, {1, 2, 3}), 1);  // all elements in one batched call
  EXPECT_EQ(eval(b, Input::array()).size(), 0u);
}

TEST(BlocksSequence, FoldIsALeftFoldOfDepthN) {
  Block fold = Map(Scalar()) >> Fold(digits(), Zeros(Type::scalar()));
  EXPECT_THAT(floats(eval(fold, {1, 2, 3})), ElementsAre(123));
  EXPECT_EQ(max_depth(fold, {1, 2, 3}), 3);
  EXPECT_THAT(floats(eval(fold, Input::array())), ElementsAre(0));
  EXPECT_EQ(max_depth(fold, Input::array()), 0);
  weft::Tensor five = weft::Tensor::from_vector({}, std::vector<float>{5});
  EXPECT_THAT(floats(eval(Map(Scalar()) >> Fold(digits(), FromTensor(five)), {1, 2})),
              ElementsAre(512));
}

TEST(BlocksSequence, ReduceIsBalancedAndCarriesTheOddElement) {
  Block reduce = Map(Scalar()) >> Reduce(digits());
  // (1,2)->12 (3,4)->34, 5 carried; (12,34)->154, 5; (154,5)->1545.
  EXPECT_THAT(floats(eval(reduce, range(5))), ElementsAre(1545));
  EXPECT_EQ(max_depth(reduce, range(5)), 3);
  EXPECT_THAT(floats(eval(reduce, range(3))), ElementsAre(123));
  EXPECT_EQ(max_depth(reduce, range(3)), 2);
  EXPECT_THAT(floats(eval(reduce, range(4))), ElementsAre(154));  // (12, 34)
  EXPECT_EQ(max_depth(reduce, range(4)), 2);
  EXPECT_THAT(floats(eval(reduce, range(1))), ElementsAre(1));
  EXPECT_EQ(max_depth(reduce, range(1)), 0);
  EXPECT_EQ(max_depth(reduce, range(8)), 3);
  EXPECT_EQ(max_depth(reduce, range(9)), 4);
  EXPECT_THAT(floats(eval(reduce, Input::array())), ElementsAre(0));
  weft::Tensor seven = weft::Tensor::from_vector({}, std::vector<float>{7});
  EXPECT_THAT(floats(eval(Map(Scalar()) >> Reduce(digits(), FromTensor(seven)), Input::array())),
              ElementsAre(7));
}

TEST(BlocksSequence, SumMinMaxMean) {
  Input rows = {{1, 5}, {3, 2}, {0, 4}};
  EXPECT_THAT(floats(eval(Map(Vector(2)) >> Sum(), rows)), ElementsAre(4, 11));
  EXPECT_THAT(floats(eval(Map(Vector(2)) >> Min(), rows)), ElementsAre(0, 2));
  EXPECT_THAT(floats(eval(Map(Vector(2)) >> Max(), rows)), ElementsAre(3, 5));
  EXPECT_THAT(floats(eval(Map(Vector(2)) >> Mean(), rows)),
              ::testing::Pointwise(::testing::FloatNear(1e-6f), {4.0f / 3, 11.0f / 3}));
  for (Block b : {Block(Sum()), Block(Min()), Block(Max()), Block(Mean())})
    EXPECT_THAT(floats(eval(Map(Vector(2)) >> b, Input::array())), ElementsAre(0, 0));
  // Sum pairs as TF Fold's (ceil(log2 n)) and Mean adds one call after it; Sum in order of
  // float32 tensors is one call at any length.
  EXPECT_EQ(max_depth(Map(Scalar()) >> Mean(), range(4)), 3);
  EXPECT_EQ(max_depth(Map(Scalar()) >> Sum(), range(4)), 2);
  EXPECT_EQ(max_depth(Map(Scalar()) >> Max(), range(4)), 2);
  for (int n : {1, 2, 4, 9})
    EXPECT_EQ(max_depth(Map(Scalar()) >> Sum(SumOrder::kInOrder), range(n)), 1) << n << " elements";
}

TEST(BlocksSequence, SumInOrderAddsTheElementsOneAfterAnother) {
  // In float32, ((1e8 + 1) - 1e8) + 1 = 1 one after another; TF Fold's pairing,
  // (1e8 + 1) + (-1e8 + 1), gives 0.
  const Input values = {1e8, 1, -1e8, 1};
  EXPECT_THAT(floats(eval(Map(Scalar()) >> Sum(SumOrder::kInOrder), values)), ElementsAre(1));
  EXPECT_THAT(floats(eval(Map(Scalar()) >> Sum(), values)), ElementsAre(0));
  // Integer elements still reduce (pairwise, by add), and so do tuples of one type.
  EXPECT_THAT(
      eval(Map(Scalar(DType::kInt32)) >> Sum(SumOrder::kInOrder), {1, 2, 3}).tensor.to_int_vector(),
      ElementsAre(6));
  EXPECT_THAT(floats(eval(AllOf({Scalar(), Scalar()}) >> Sum(SumOrder::kInOrder), 2)),
              ElementsAre(4));
}

// Sequences of lengths 0 to 7 in one batch, summed in order, elements scaled by a parameter:
// each example's sum equals the example alone (bit for bit) and the parameter's gradient the
// sum of theirs.
TEST(BlocksSequence, SumInOrderBatchedEqualsOneAtATime) {
  Parameter w("w", random_tensor({2}, 3));
  Block scaled =
      Map(Vector(2) >> Function("scale", {Type::vector(2)},
                                [w](std::span<const Var> x) { return x[0] * Var(w); })) >>
      Sum(SumOrder::kInOrder);
  Compiler c(scaled);
  std::vector<Input> examples;
  for (int n = 0; n < 8; ++n) {
    Input e = Input::array();
    for (int i = 0; i < n; ++i) e.push_back(Input::array({0.5 * i - 1.25, 3.0 / (i + 1)}));
    examples.push_back(e);
  }
  const weft::Tensor weights = random_tensor({8, 2}, 11);
  w.zero_grad();
  Tape tape;
  Var out = c.forward(examples, tape).output();
  tape.backward(sum(out * tape.constant(weights)));
  const std::vector<float> batched = out.value().to_float_vector();
  const std::vector<float> batched_grad = w.grad().to_float_vector();
  std::vector<float> grad(2, 0.0f);
  for (std::size_t e = 0; e < examples.size(); ++e) {
    w.zero_grad();
    Tape alone;
    Var y = c.forward(std::vector<Input>{examples[e]}, alone).output();
    alone.backward(sum(y * alone.constant(weights.rows_view(std::int64_t(e), 1).clone())));
    EXPECT_THAT(y.value().to_float_vector(), ElementsAre(batched[2 * e], batched[2 * e + 1]))
        << "example " << e;
    for (std::size_t j = 0; j < 2; ++j) grad[j] += w.grad().to_float_vector()[j];
  }
  for (std::size_t j = 0; j < 2; ++j) EXPECT_NEAR(batched_grad[j], grad[j], 1e-5);
  EXPECT_THAT(std::vector<float>(batched.begin(), batched.begin() + 2), ElementsAre(0, 0));
}

TEST(BlocksSequence, MapOfIdentityKeepsTheValue) {
  Block ids = GetItem("ids") >> Map(Identity());
  EXPECT_EQ(eval(ids, {{"ids", {3, 1, 2}}}).input, Input({3, 1, 2}));
  EXPECT_THAT(floats(eval(Map(Scalar()) >> Map(Identity()) >> Sum(), {1, 2})), ElementsAre(3));
  EXPECT_THAT(error_of([&] { eval(ids, {{"ids", {{"a", 1}}}}); }), HasSubstr("Map"));
}

TEST(BlocksSequence, RnnThreadsTheState) {
  // cell (x, s) -> (x + s, x + s): outputs are the running sums.
  Function cell("cell", {Type::scalar(), Type::scalar()}, [](std::span<const Var> x) {
    Var s = x[0] + x[1];
    return std::vector<Var>{s, s};
  });
  Block rnn = Map(Scalar()) >> RNN(cell);
  EXPECT_EQ(*rnn.output_type(), Type::tuple({Type::sequence(Type::scalar()), Type::scalar()}));
  EvalValue v = eval(rnn, {1, 2, 3});
  ASSERT_EQ(v[0].size(), 3u);
  EXPECT_THAT(floats(v[0][1]), ElementsAre(3));
  EXPECT_THAT(floats(v[0][2]), ElementsAre(6));
  EXPECT_THAT(floats(v[1]), ElementsAre(6));
  EvalValue empty = eval(rnn, Input::array());
  EXPECT_EQ(empty[0].size(), 0u);
  EXPECT_THAT(floats(empty[1]), ElementsAre(0));
  // The initial state from the input.
  Block from_input = Record({Map(Scalar()), Scalar()}) >> RNN(cell, Block(), true);
  EXPECT_THAT(floats(eval(from_input, {{1, 2}, 10})[1]), ElementsAre(13));
}

TEST(BlocksSequence, BroadcastWithZip) {
  Block b =
      Record({{"xs", Map(Scalar())}, {"b", Scalar() >> Broadcast()}}) >> ZipWith(scalar_add());
  EXPECT_EQ(*b.output_type(), Type::sequence(Type::scalar()));
  EvalValue v = eval(b, {{"xs", {1, 2, 3}}, {"b", 10}});
  ASSERT_EQ(v.size(), 3u);
  EXPECT_THAT(floats(v[0]), ElementsAre(11));
  EXPECT_THAT(floats(v[2]), ElementsAre(13));
  // Zip truncates to the shortest; all-broadcast stays broadcast.
  EvalValue z = eval(Record({Map(Scalar()), Map(Scalar())}) >> Zip(), {{1, 2, 3}, {4, 5}});
  ASSERT_EQ(z.size(), 2u);
  EXPECT_THAT(floats(z[1][1]), ElementsAre(5));
  Block all = AllOf({Scalar() >> Broadcast(), Scalar() >> Broadcast()}) >> Zip();
  EXPECT_EQ(*all.output_type(), Type::broadcast(Type::tuple({Type::scalar(), Type::scalar()})));
  Block mapped = Scalar() >> Broadcast() >> Map(Identity());
  EXPECT_EQ(*mapped.output_type(), Type::broadcast(Type::scalar()));
  // An Input list zips as a sequence of Input: here values[i] for each index i of the list.
  Block pick =
      Record({{"xs", Map(Scalar()) >> Broadcast()}, {"ids", Identity()}}) >> Zip() >> Map(Nth());
  EvalValue picked = eval(pick, {{"xs", {4, 5, 6}}, {"ids", {2, 0, 2}}});
  ASSERT_EQ(picked.size(), 3u);
  EXPECT_THAT(floats(picked[0]), ElementsAre(6));
  EXPECT_THAT(floats(picked[1]), ElementsAre(4));
  EXPECT_THAT(floats(picked[2]), ElementsAre(6));
  EXPECT_THAT(error_of([] {
                AllOf({Scalar(), Scalar()}) >> Zip();
              }),
              HasSubstr("expected a Tuple of Sequences (or Input lists)"));
}

TEST(BlocksSequence, NGramsAndNth) {
  EvalValue g = eval(Map(Scalar()) >> NGrams(2), {1, 2, 3});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_THAT(floats(g[1][0]), ElementsAre(2));
  EXPECT_THAT(floats(g[1][1]), ElementsAre(3));
  EXPECT_EQ(eval(Map(Scalar()) >> NGrams(4), {1, 2, 3}).size(), 0u);
  EXPECT_THAT(error_of([] { NGrams(0); }), HasSubstr("n must be positive, got 0"));
  Block nth = Record({{"xs", Map(Scalar())}, {"i", Identity()}}) >> Nth();
  EXPECT_THAT(floats(eval(nth, {{"xs", {4, 5, 6}}, {"i", -1}})), ElementsAre(6));
  EXPECT_THAT(error_of([&] {
                eval(nth, {{"xs", {4, 5, 6}}, {"i", 3}});
              }),
              HasSubstr("<Nth>: index 3 is out of range for 3 items"));
}

}  // namespace
}  // namespace weft::testing
