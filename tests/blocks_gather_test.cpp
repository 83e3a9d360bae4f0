// Gather (a whole list of indices read in one weave step) and GatherLists (a list of such
// lists). Their values against TF Fold's spelling (Zip >> Map(Nth) over a Broadcast), a batch of
// neighbour sums against each example alone (bit for bit) and the gradient of a parameter
// against finite differences, and bad input: a non-list, a non-integer and an index out of
// range, each named with the block, the list and the position.
#include "blocks_test_util.h"

namespace weft::testing {
namespace {

// Tuple(values, ids) in TF Fold's spelling: one tuple and one Nth per index.
Block zip_nth() {
  Composition c("zip_nth");
  auto values = c.add(Broadcast(), c.input()[0]);
  c.set_output(c.add(Zip() >> Map(Nth()), {values, c.input()[1]}));
  return c;
}

TEST(BlocksGather, PicksEachIndexAsZipOfNthDoes) {
  Block values = Map(Scalar());
  Block gather = Record({{"xs", values}, {"ids", Identity()}}) >> Gather();
  const Input input = {{"xs", {4, 5, 6}}, {"ids", {2, 0, 2, -1, -3}}};
  EvalValue picked = eval(gather, input);
  EvalValue nth = eval(Record({{"xs", values}, {"ids", Identity()}}) >> zip_nth(), input);
  ASSERT_EQ(picked.size(), 5u);
  ASSERT_EQ(nth.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(floats(picked[i]), floats(nth[i])) << i;
  EXPECT_THAT(floats(picked[3]), ElementsAre(6));
  EXPECT_THAT(floats(picked[4]), ElementsAre(4));
  // Nothing to gather: an empty sequence, and its in-order sum zeros. Depth 0 on its own.
  const Input none = {{"xs", {4, 5}}, {"ids", Input::array()}};
  EXPECT_EQ(eval(gather, none).size(), 0u);
  EXPECT_THAT(floats(eval(gather >> Sum(SumOrder::kInOrder), none)), ElementsAre(0));
  EXPECT_EQ(max_depth(gather, input), 0);
}

TEST(BlocksGather, BadInputNamesTheBlockAndThePosition) {
  Block gather = Record({{"xs", Map(Scalar())}, {"ids", Identity()}}) >> Gather();
  EXPECT_THAT(error_of([&] {
                eval(gather, {{"xs", {4, 5, 6}}, {"ids", {0, 7}}});
              }),
              HasSubstr("<Gather> (position 1 of the list): index 7 is out of range for 3 items"));
  EXPECT_THAT(error_of([&] {
                eval(gather, {{"xs", {4, 5, 6}}, {"ids", {-4}}});
              }),
              HasSubstr("<Gather> (position 0 of the list): index -4 is out of range"));
  EXPECT_THAT(error_of([&] {
                eval(gather, {{"xs", {4, 5, 6}}, {"ids", {0, 1.5}}});
              }),
              HasSubstr("<Gather>: position 1 of the list must be an integer, got 1.5"));
  EXPECT_THAT(error_of([&] {
                eval(gather, {{"xs", {4, 5, 6}}, {"ids", 2}});
              }),
              HasSubstr("<Gather>: the indices must be a list of integers, got 2"));
  EXPECT_THAT(error_of([] { Map(Scalar()) >> Gather(); }),
              HasSubstr("it takes 2 inputs (expected Tuple(Sequence, Input list of indices))"));
  EXPECT_THAT(error_of([] {
                Record({Map(Scalar()), Scalar()}) >> Gather();
              }),
              HasSubstr("the second input must be user data"));
  EXPECT_THAT(error_of([] {
                Record({Scalar(), Scalar()}) >> Gather();
              }),
              HasSubstr("the first input must be a sequence"));
}

TEST(BlocksGather, GatherListsIsGatherForEachList) {
  Block lists = Record({{"xs", Map(Scalar())}, {"ids", Identity()}}) >> GatherLists();
  Block each =
      Record({{"xs", Map(Scalar()) >> Broadcast()}, {"ids", Identity()}}) >> Zip() >> Map(Gather());
  const Input input = {{"xs", {4, 5, 6}}, {"ids", {{2, 0}, Input::array(), {-1, 1, 1}}}};
  EvalValue got = eval(lists, input), want = eval(each, input);
  ASSERT_EQ(got.size(), 3u);
  for (std::size_t j = 0; j < 3; ++j) {
    ASSERT_EQ(got[j].size(), want[j].size()) << "list " << j;
    for (std::size_t k = 0; k < got[j].size(); ++k)
      EXPECT_EQ(floats(got[j][k]), floats(want[j][k]));
  }
  EXPECT_EQ(got[1].size(), 0u);
  EXPECT_THAT(floats(got[2][0]), ElementsAre(6));
  EXPECT_EQ(max_depth(lists, input), 0);
  EXPECT_THAT(error_of([&] {
                eval(lists, {{"xs", {4, 5, 6}}, {"ids", {{0}, {1, 3}}}});
              }),
              HasSubstr("<GatherLists> (list 1, position 1): index 3 is out of range for 3 items"));
  EXPECT_THAT(error_of([&] {
                eval(lists, {{"xs", {4, 5, 6}}, {"ids", {{0}, 2}}});
              }),
              HasSubstr("<GatherLists>: list 1 must be a list of integers, got 2"));
  EXPECT_THAT(error_of([&] {
                eval(lists, {{"xs", {4, 5, 6}}, {"ids", {{0, "a"}}}});
              }),
              HasSubstr("<GatherLists>: list 0, position 1 must be an integer"));
  EXPECT_THAT(error_of([&] {
                eval(lists, {{"xs", {4, 5, 6}}, {"ids", 1}});
              }),
              HasSubstr("<GatherLists>: the indices must be a list of lists of integers, got 1"));
  EXPECT_THAT(error_of([] {
                Record({Scalar(), Scalar()}) >> GatherLists();
              }),
              HasSubstr("the first input must be a sequence"));
}

// Each atom's neighbour sum, as a graph network weaves it: values scaled by a parameter, then
// for each list the sum of the values it names (repeats and empty lists included), each list
// gathered by Gather (`lists` false) or all of them by GatherLists.
Block neighbour_sums(const Parameter& w, bool lists) {
  Block scaled = Map(Vector(2) >> Function("scale", {Type::vector(2)},
                                           [w](std::span<const Var> x) { return x[0] * Var(w); }));
  Composition c("neighbour_sums");
  auto values = c.add(GetItem("xs") >> scaled, c.input());
  auto nbrs = c.add(GetItem("nbrs"), c.input());
  auto sums = lists ? c.add(GatherLists() >> Map(Sum(SumOrder::kInOrder)), {values, nbrs})
                    : c.add(Zip() >> Map(Gather() >> Sum(SumOrder::kInOrder)),
                            {c.add(Broadcast(), values), nbrs});
  c.set_output(c.add(Sum(SumOrder::kInOrder), sums));
  return c;
}

std::vector<Input> graphs() {
  std::vector<Input> examples;
  for (int n = 1; n < 7; ++n) {
    Input xs = Input::array(), nbrs = Input::array();
    for (int i = 0; i < n; ++i) {
      xs.push_back(Input::array({0.5 * i - 1.25, 3.0 / (i + 1)}));
      Input list = Input::array();
      for (int j = 0; j < (i * 5 + n) % 4; ++j) list.push_back((i + 2 * j + 1) % n);
      nbrs.push_back(list);
    }
    examples.push_back({{"xs", xs}, {"nbrs", nbrs}});
  }
  return examples;
}

// sum(outputs * weights) and the parameter's gradient, for `examples` in one batch.
float weighted_loss(Compiler& c, const std::vector<Input>& examples, const weft::Tensor& weights,
                    Parameter& w, std::vector<float>* outputs) {
  w.zero_grad();
  Tape tape;
  Var out = c.forward(examples, tape).output();
  Var loss = sum(out * tape.constant(weights));
  tape.backward(loss);
  if (outputs) *outputs = out.value().to_float_vector();
  return loss.value().to_float_vector()[0];
}

class BlocksGatherBatch : public ::testing::TestWithParam<bool> {};

TEST_P(BlocksGatherBatch, BatchedEqualsOneAtATimeAndGradientsMatchFiniteDifferences) {
  Parameter w("w", random_tensor({2}, 3));
  Compiler c(neighbour_sums(w, GetParam()));
  const std::vector<Input> examples = graphs();
  const auto n = std::int64_t(examples.size());
  const weft::Tensor weights = random_tensor({n, 2}, 11);
  std::vector<float> batched;
  weighted_loss(c, examples, weights, w, &batched);
  const std::vector<float> grad = w.grad().to_float_vector();
  for (std::int64_t e = 0; e < n; ++e) {
    std::vector<float> alone;
    weighted_loss(c, {examples[std::size_t(e)]}, weights.rows_view(e, 1).clone(), w, &alone);
    EXPECT_THAT(alone, ElementsAre(batched[std::size_t(2 * e)], batched[std::size_t(2 * e + 1)]))
        << "example " << e;
  }
  // The loss is linear in w: central differences are exact up to float32 rounding.
  const weft::Tensor start = w.value().clone();
  for (std::int64_t j = 0; j < 2; ++j) {
    const float step = 0.01f;
    std::vector<float> v = start.to_float_vector();
    v[std::size_t(j)] += step;
    w.value() = weft::Tensor::from_vector({2}, v);
    const float up = weighted_loss(c, examples, weights, w, nullptr);
    v[std::size_t(j)] -= 2 * step;
    w.value() = weft::Tensor::from_vector({2}, v);
    const float down = weighted_loss(c, examples, weights, w, nullptr);
    EXPECT_NEAR(grad[std::size_t(j)], (up - down) / (2 * step),
                1e-3 * std::max(1.0f, std::abs(grad[std::size_t(j)])))
        << "w[" << j << "]";
  }
  w.value() = start;
}
INSTANTIATE_TEST_SUITE_P(GatherAndGatherLists, BlocksGatherBatch, ::testing::Bool());

}  // namespace
}  // namespace weft::testing
