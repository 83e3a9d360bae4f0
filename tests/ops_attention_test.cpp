// ragged_attention: against a float64 reference that reads only each item's own rows (gradients
// against finite differences, the padding's gradient zero), against the padded-and-masked
// composition it replaces in the decoders (values and gradients), an item's result independent of
// its companions and of its padding bit for bit (padding full of NaN is never read), a memory
// read where its rows lie equal to a dense one, and its errors.
#include <cmath>
#include <limits>

#include "op_test_util.h"
#include "weft/autodiff/argument_rows.h"

namespace weft::testing {
namespace {

// y[i, b] = Σ_t<L softmax_t(q[i, b] · m[i, t]) m[i, t], L = lengths[i], in float64.
HostArray reference_attention(const HostArray& q, const HostArray& m,
                              const std::vector<std::int32_t>& lengths) {
  const std::int64_t n = q.shape[0], beams = q.shape[1], hidden = q.shape[2];
  const std::int64_t size = m.shape[1];
  HostArray y(q.shape, std::vector<double>(q.size(), 0.0));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t b = 0; b < beams; ++b) {
      const std::size_t row = std::size_t((i * beams + b) * hidden);
      const auto memory = [&](std::int64_t t, std::int64_t j) {
        return m[std::size_t((i * size + t) * hidden + j)];
      };
      std::vector<double> score(std::size_t(lengths[std::size_t(i)]));
      double max = -1e300, total = 0.0;
      for (std::size_t t = 0; t < score.size(); ++t) {
        for (std::int64_t j = 0; j < hidden; ++j)
          score[t] += q[row + std::size_t(j)] * memory(std::int64_t(t), j);
        max = std::max(max, score[t]);
      }
      for (double& s : score) total += (s = std::exp(s - max));
      for (std::size_t t = 0; t < score.size(); ++t)
        for (std::int64_t j = 0; j < hidden; ++j)
          y[row + std::size_t(j)] += score[t] / total * memory(std::int64_t(t), j);
    }
  return y;
}

Tensor lengths_tensor(const std::vector<std::int32_t>& lengths) {
  return Tensor::from_vector(Shape{std::int64_t(lengths.size())}, lengths);
}

// The decoders' attention before this op: scores over the whole padded memory, -1e9 added on the
// padding, softmax, and the weighted sum of every row.
Var padded_masked_attention(Var q, Var m, const std::vector<std::int32_t>& lengths) {
  const std::int64_t n = q.shape()[0], beams = q.shape()[1], size = m.shape()[1];
  std::vector<float> mask(std::size_t(n * beams * size), 0.0f);
  for (std::int64_t r = 0; r < n * beams; ++r)
    for (std::int64_t t = lengths[std::size_t(r / beams)]; t < size; ++t)
      mask[std::size_t(r * size + t)] = -1e9f;
  const Var scores = batch_matmul(q, m, false, true) +
                     q.tape().constant(Tensor::from_vector({n, beams, size}, mask));
  return batch_matmul(reshape(softmax(reshape(scores, {n * beams, size})), {n, beams, size}), m);
}

struct Case {
  std::int64_t beams, size, hidden;
  std::vector<std::int32_t> lengths;
};
// Hidden sizes off and on the kernel's 16-float blocks; lengths from 1 to the whole memory.
const Case kCases[] = {
    {1, 5, 7, {5, 1, 3}}, {3, 4, 20, {2, 4, 1, 3}}, {1, 8, 32, {8, 6}}, {4, 6, 17, {1, 6, 3}}};

WEFT_OP_TEST(ragged_attention, AgainstReferenceAndGradients) {
  std::uint64_t seed = 31;
  for (const Case& c : kCases) {
    SCOPED_TRACE("beams " + std::to_string(c.beams) + ", hidden " + std::to_string(c.hidden));
    const std::int64_t n = std::int64_t(c.lengths.size());
    const Tensor lengths = lengths_tensor(c.lengths);
    // The memory's gradient is checked everywhere, padding included: the reference does not
    // read the padding, so its finite difference there is 0.
    check_op(
        [&](const std::vector<Var>& v) { return ragged_attention(v[0], v[1], lengths); },
        [&](const std::vector<HostArray>& h) { return reference_attention(h[0], h[1], c.lengths); },
        {random_tensor({n, c.beams, c.hidden}, seed, -1.5f, 1.5f),
         random_tensor({n, c.size, c.hidden}, seed + 1, -1.5f, 1.5f)});
    seed += 2;
  }
}

// Values and both gradients of the op and of the composition, under one cotangent.
struct Outcome {
  std::vector<float> value, dq, dm;
};
Outcome run(bool fused, const Tensor& q, const Tensor& m, const std::vector<std::int32_t>& lengths,
            const Tensor& cotangent) {
  Tape tape;
  const Var vq = tape.variable(q.clone()), vm = tape.variable(m.clone());
  const Var y = fused ? ragged_attention(vq, vm, lengths_tensor(lengths))
                      : padded_masked_attention(vq, vm, lengths);
  tape.backward(y, cotangent);
  return {y.value().to_float_vector(), vq.grad().to_float_vector(), vm.grad().to_float_vector()};
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 2e-6 + 2e-5 * std::abs(want[i])) << what << " " << i;
}

TEST(Op_ragged_attention, EqualsThePaddedMaskedComposition) {
  std::uint64_t seed = 51;
  for (const Case& c : kCases) {
    SCOPED_TRACE("beams " + std::to_string(c.beams) + ", hidden " + std::to_string(c.hidden));
    const std::int64_t n = std::int64_t(c.lengths.size());
    const Tensor q = random_tensor({n, c.beams, c.hidden}, seed++, -2, 2);
    const Tensor m = random_tensor({n, c.size, c.hidden}, seed++, -2, 2);
    const Tensor dy = random_tensor(q.shape(), seed++);
    const Outcome fused = run(true, q, m, c.lengths, dy),
                  composed = run(false, q, m, c.lengths, dy);
    expect_near(fused.value, composed.value, "value");
    expect_near(fused.dq, composed.dq, "queries' gradient");
    expect_near(fused.dm, composed.dm, "memory's gradient");
  }
}

// Item i's memory alone, padded with `extra` rows of NaN after its own `length` rows.
Tensor alone_padded(const Tensor& m, std::int64_t i, std::int64_t length, std::int64_t extra) {
  const std::int64_t hidden = m.shape()[2];
  std::vector<float> rows = m.rows_view(i, 1).to_float_vector();
  rows.resize(std::size_t(length * hidden));
  rows.resize(std::size_t((length + extra) * hidden), std::numeric_limits<float>::quiet_NaN());
  return Tensor::from_vector({1, length + extra, hidden}, rows);
}

TEST(Op_ragged_attention, AnItemsResultIgnoresItsCompanionsAndPaddingBitForBit) {
  const Case c{3, 12, 40, {12, 1, 7, 3, 9}};
  const std::int64_t n = std::int64_t(c.lengths.size());
  const Tensor q = random_tensor({n, c.beams, c.hidden}, 61, -2, 2);
  const Tensor m = random_tensor({n, c.size, c.hidden}, 62, -2, 2);
  const Tensor dy = random_tensor(q.shape(), 63);
  const Outcome batch = run(true, q, m, c.lengths, dy);
  const std::size_t out_row = std::size_t(c.beams * c.hidden);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t length = c.lengths[std::size_t(i)];
    // Alone, with a memory of its own length, then padded with NaN to another size.
    for (const std::int64_t extra : {std::int64_t(0), std::int64_t(5)}) {
      SCOPED_TRACE("item " + std::to_string(i) + ", NaN rows " + std::to_string(extra));
      const Outcome alone = run(true, q.rows_view(i, 1), alone_padded(m, i, length, extra),
                                {length}, dy.rows_view(i, 1));
      const auto from = batch.value.begin() + std::ptrdiff_t(std::size_t(i) * out_row);
      EXPECT_TRUE(std::equal(alone.value.begin(), alone.value.end(), from));
      EXPECT_TRUE(std::equal(alone.dq.begin(), alone.dq.end(),
                             batch.dq.begin() + std::ptrdiff_t(std::size_t(i) * out_row)));
      const std::size_t own = std::size_t(length * c.hidden);
      const auto dm_from = batch.dm.begin() + std::ptrdiff_t(std::size_t(i * c.size * c.hidden));
      EXPECT_TRUE(std::equal(alone.dm.begin(), alone.dm.begin() + std::ptrdiff_t(own), dm_from));
      for (std::size_t k = own; k < alone.dm.size(); ++k)
        ASSERT_EQ(alone.dm[k], 0.0f) << "padding's gradient, element " << k;
      for (std::size_t k = own; k < std::size_t(c.size * c.hidden); ++k)
        ASSERT_EQ(dm_from[std::ptrdiff_t(k)], 0.0f) << "batch padding's gradient, element " << k;
    }
  }
}

TEST(Op_ragged_attention, MemoryReadWhereItsRowsLieEqualsDense) {
  set_read_rows_in_place(ReadRows::kWithoutGradients);
  Tape tape;
  TapeScope scope(tape);
  tape.set_grad_enabled(false);
  const std::int64_t size = 4, hidden = 24;
  const Tensor q = random_tensor({3, 2, hidden}, 71);
  const Tensor pool = random_tensor({5, size * hidden}, 72);  // five memories, one a row
  const Var source = tape.record(pool.clone(), {tape.constant(pool.clone())}, nullptr);
  // Items 0, 1, 2 are the pool's memories 3, 0, 4: (source, row) pairs.
  const Tensor refs = Tensor::from_vector(Shape{3, 2}, std::vector<std::int32_t>{0, 3, 0, 0, 0, 4});
  const std::int64_t width = size * hidden;
  const Var rows = argument_rows(std::vector<Var>{source}, refs, 3, std::span(&width, 1),
                                 Shape{3, size, hidden});
  ASSERT_TRUE(detail::reads_items_in_place(tape, rows.id()));
  const Tensor lengths = lengths_tensor({2, 4, 1});
  const std::vector<float> in_place =
      ragged_attention(tape.constant(q), rows, lengths).value().to_float_vector();
  ASSERT_TRUE(detail::reads_items_in_place(tape, rows.id())) << "the memory was gathered";
  const Var dense = tape.constant(rows.value().clone());
  EXPECT_EQ(in_place, ragged_attention(tape.constant(q), dense, lengths).value().to_float_vector());
}

TEST(Op_ragged_attention, ErrorsNameTheOpAndTheArgument) {
  Tape tape;
  const Var q = tape.constant(random_tensor({2, 1, 4}, 1));
  const Var m = tape.constant(random_tensor({2, 3, 4}, 2));
  expect_error(
      [&] {
        ragged_attention(q, m, lengths_tensor({0, 2}));
      },
      {"[ragged_attention]", "lengths[0] = 0", "outside [1, 3]"});
  expect_error(
      [&] {
        ragged_attention(q, m, lengths_tensor({3, 4}));
      },
      {"[ragged_attention]", "lengths[1] = 4", "outside [1, 3]"});
  expect_error(
      [&] {
        ragged_attention(q, m, lengths_tensor({1, 2, 3}));
      },
      {"[ragged_attention]", "lengths must be [2]", "int32 [3]"});
  expect_error(
      [&] {
        ragged_attention(q, m, Tensor::from_vector({2}, std::vector<std::int64_t>{1, 2}));
      },
      {"[ragged_attention]", "lengths must be int32", "int64"});
  expect_error(
      [&] {
        ragged_attention(q, m, Tensor::from_vector({2}, std::vector<float>{1, 2}));
      },
      {"[ragged_attention]", "lengths must be int32", "float32"});
  expect_error(
      [&] {
        ragged_attention(q, tape.constant(random_tensor({2, 3, 5}, 3)), lengths_tensor({1, 1}));
      },
      {"[ragged_attention]", "queries [2, 1, 4] do not fit memory [2, 3, 5]"});
  expect_error(
      [&] {
        ragged_attention(q, tape.constant(random_tensor({2, 12}, 4)), lengths_tensor({1, 1}));
      },
      {"[ragged_attention]", "memory must have rank 3"});
  expect_error(
      [&] {
        ragged_attention(tape.constant(int_tensor({2, 1, 4}, std::vector<std::int32_t>(8, 1))), m,
                         lengths_tensor({1, 1}));
      },
      {"[ragged_attention]", "queries must be float32"});
}

}  // namespace
}  // namespace weft::testing
