// Row indexing ops (gather_rows, embedding_lookup, scatter_add_rows): references with
// duplicated indices, so gradients must sum; per-row id batching; int32 rows; zero rows;
// and the index validation messages (dtype, rank, range, count).
#include "op_test_util.h"

namespace weft::testing {
namespace {

HostArray gather_reference(const HostArray& x, const std::vector<std::int32_t>& indices) {
  const std::size_t row = std::size_t(x.shape.row_size());
  std::vector<double> out;
  for (std::int32_t i : indices)
    for (std::size_t j = 0; j < row; ++j) out.push_back(x[std::size_t(i) * row + j]);
  return HostArray(x.shape.with_rows(std::int64_t(indices.size())), out);
}

HostArray scatter_reference(const HostArray& x, const std::vector<std::int32_t>& indices,
                            std::int64_t num_rows) {
  const std::size_t row = std::size_t(x.shape.row_size());
  std::vector<double> out(std::size_t(num_rows) * row, 0.0);
  for (std::size_t i = 0; i < indices.size(); ++i)
    for (std::size_t j = 0; j < row; ++j) out[std::size_t(indices[i]) * row + j] += x[i * row + j];
  return HostArray(x.shape.with_rows(num_rows), out);
}

Tensor indices_tensor(const std::vector<std::int32_t>& values) {
  return int_tensor({std::int64_t(values.size())}, values);
}

WEFT_OP_TEST(gather_rows, DuplicatedIndicesSumGradients) {
  const std::vector<std::int32_t> idx = {3, 0, 3, 4, 3, 1};
  const Tensor indices = indices_tensor(idx);
  check_op([&](const std::vector<Var>& v) { return gather_rows(v[0], indices); },
           [&](const std::vector<HostArray>& h) { return gather_reference(h[0], idx); },
           {random_tensor({5, 2, 3}, 100)});
}

WEFT_OP_TEST(gather_rows, RankOneInput) {
  const std::vector<std::int32_t> idx = {2, 2, 0};
  const Tensor indices = indices_tensor(idx);
  check_op([&](const std::vector<Var>& v) { return gather_rows(v[0], indices); },
           [&](const std::vector<HostArray>& h) { return gather_reference(h[0], idx); },
           {random_tensor({4}, 101)});
}

TEST(Op_gather_rows, BatchedMatchesRows) {
  // The table is passed whole; each row of the batch gathers by its own id.
  check_batched_matches_rows(
      [](const std::vector<Var>& v) { return gather_rows(v[0], v[1].value()); },
      {random_tensor({7, 3}, 102), indices_tensor({6, 0, 2, 2, 5})}, {false, true});
}

TEST(Op_gather_rows, Int32Rows) {
  Tape tape;
  Var table = tape.constant(int_tensor({3, 2}, {10, 11, 20, 21, 30, 31}));
  Var y = gather_rows(table, indices_tensor({2, 0, 2}));
  EXPECT_EQ(y.value().dtype(), DType::kInt32);
  EXPECT_EQ(y.value().to_int_vector(), (std::vector<std::int32_t>{30, 31, 10, 11, 30, 31}));
}

TEST(Op_gather_rows, ZeroRows) {
  Tape tape;
  Var x = tape.variable(random_tensor({4, 3}, 103));
  Var y = gather_rows(x, indices_tensor({}));
  EXPECT_EQ(y.shape(), (Shape{0, 3}));
  tape.backward(y, Tensor::zeros({0, 3}));
  EXPECT_EQ(x.grad().to_float_vector(), std::vector<float>(12, 0.0f));
  Var empty_table = tape.variable(Tensor::zeros({0, 3}));
  EXPECT_EQ(gather_rows(empty_table, indices_tensor({})).shape(), (Shape{0, 3}));
}

TEST(Op_gather_rows, ErrorsNameTheIndices) {
  Tape tape;
  Var x = tape.constant(random_tensor({5, 2}, 1));
  expect_error(
      [&] {
        gather_rows(x, indices_tensor({0, 1, 2, 7}));
      },
      {"[gather_rows] indices value 7 at position 3 is out of range [0, 5)"});
  expect_error([&] { gather_rows(x, indices_tensor({-1})); },
               {"[gather_rows] indices value -1 at position 0 is out of range [0, 5)"});
  expect_error([&] { gather_rows(x, random_tensor({3}, 2)); },
               {"[gather_rows] indices must be int32 or int64, got float32 [3]"});
  expect_error(
      [&] {
        gather_rows(x, int_tensor({2, 1}, {0, 1}));
      },
      {"[gather_rows] indices must have rank 1, got int32 [2, 1]"});
  Var s = tape.constant(Tensor::scalar(1.0f));
  expect_error([&] { gather_rows(s, indices_tensor({0})); },
               {"[gather_rows] input must have a leading (row) axis, got float32 []"});
}

WEFT_OP_TEST(embedding_lookup, RepeatedIdsSumGradients) {
  const std::vector<std::int32_t> idx = {2, 2, 5, 0, 2};
  const Tensor ids = indices_tensor(idx);
  check_op([&](const std::vector<Var>& v) { return embedding_lookup(v[0], ids); },
           [&](const std::vector<HostArray>& h) { return gather_reference(h[0], idx); },
           {random_tensor({6, 4}, 110)});
}

TEST(Op_embedding_lookup, BatchedMatchesRows) {
  check_batched_matches_rows(
      [](const std::vector<Var>& v) { return embedding_lookup(v[0], v[1].value()); },
      {random_tensor({9, 2, 2}, 111), indices_tensor({8, 1, 1, 4, 0, 3})}, {false, true});
}

TEST(Op_embedding_lookup, ErrorsNameTheIds) {
  Tape tape;
  Var table = tape.constant(random_tensor({5, 2}, 3));
  expect_error(
      [&] {
        embedding_lookup(table, indices_tensor({4, 5}));
      },
      {"[embedding_lookup] ids value 5 at position 1 is out of range [0, 5)"});
  expect_error([&] { embedding_lookup(table, random_tensor({2}, 4)); },
               {"[embedding_lookup] ids must be int32 or int64, got float32 [2]"});
}

WEFT_OP_TEST(scatter_add_rows, DuplicatedIndicesAndEmptyRows) {
  const std::vector<std::int32_t> idx = {1, 4, 1, 0, 4, 4};
  const Tensor indices = indices_tensor(idx);
  check_op([&](const std::vector<Var>& v) { return scatter_add_rows(v[0], indices, 6); },
           [&](const std::vector<HostArray>& h) { return scatter_reference(h[0], idx, 6); },
           {random_tensor({6, 3, 2}, 120)});
}

TEST(Op_scatter_add_rows, UndoesAGatherOfAPermutation) {
  Tape tape;
  Var x = tape.constant(random_tensor({4, 3}, 121));
  const Tensor perm = indices_tensor({2, 0, 3, 1});
  Var back = scatter_add_rows(gather_rows(x, perm), perm, 4);
  EXPECT_EQ(back.value().to_float_vector(), x.value().to_float_vector());
}

TEST(Op_scatter_add_rows, ZeroRows) {
  Tape tape;
  Var x = tape.variable(Tensor::zeros({0, 3}));
  Var y = scatter_add_rows(x, indices_tensor({}), 2);
  EXPECT_EQ(y.value().to_float_vector(), std::vector<float>(6, 0.0f));
  tape.backward(sum(y));
  EXPECT_EQ(x.grad().shape(), (Shape{0, 3}));
}

TEST(Op_scatter_add_rows, ErrorsNameTheIndicesAndRows) {
  Tape tape;
  Var x = tape.constant(random_tensor({4, 2}, 5));
  expect_error(
      [&] {
        scatter_add_rows(x, indices_tensor({0, 1, 3}), 4);
      },
      {"[scatter_add_rows] indices int32 [3] must have one entry per row of input "
       "float32 [4, 2]"});
  expect_error(
      [&] {
        scatter_add_rows(x, indices_tensor({0, 1, 3, 3}), 3);
      },
      {"[scatter_add_rows] indices value 3 at position 2 is out of range [0, 3)"});
  expect_error(
      [&] {
        scatter_add_rows(x, indices_tensor({0, 1, 3, 3}), -1);
      },
      {"[scatter_add_rows] num_rows must be >= 0, got -1"});
  expect_error([&] { scatter_add_rows(x, random_tensor({4}, 6), 4); },
               {"[scatter_add_rows] indices must be int32 or int64, got float32 [4]"});
  Var ints = tape.constant(int_tensor({1, 1}, {1}));
  expect_error([&] { scatter_add_rows(ints, indices_tensor({0}), 1); },
               {"[scatter_add_rows] input must be float32, got int32 [1, 1]"});
}

}  // namespace
}  // namespace weft::testing
