// Issue 42 item 5: decoders read each example's memory where it lies, and the h and c halves of
// its state. batch_matmul with an operand whose items are an argument's rows (argument_rows,
// read in place) equals the product of the gathered copy bit for bit, forward and backward; a
// column slice of such an argument copies only its columns and equals the gathered slice, its
// gradients too; tree2seq and seq2tree decode the same answers and log-probabilities, bit for
// bit, with arguments read in place and gathered (WEFT_READ_ROWS 0 / auto), batched as one at a
// time, moving fewer bytes per step.
#include <gtest/gtest.h>

#include <optional>
#include <set>

#include "op_test_util.h"
#include "weft/autodiff/argument_rows.h"
#include "weft/backend/counters.h"
#include "weft/backend/cpu.h"
#include "weft/backend/gemm_selection.h"
#include "weft/models/flow_model.h"
#include "weft/models/registry.h"

namespace weft::testing {
namespace {

// One provider for every product while it lives (the calibration's choice may change between
// two products of one shape, and bit-for-bit comparisons need the same kernel), and the
// in-place setting back to its default after.
class FixedKernels {
 public:
  FixedKernels() : forced_(forced_gemm_provider()) {
    set_gemm_provider(available_gemm_providers()[0]);
  }
  ~FixedKernels() {
    forced_ ? set_gemm_provider(*forced_) : use_calibrated_gemm();
    set_read_rows_in_place(ReadRows::kWithoutGradients);
  }
  FixedKernels(const FixedKernels&) = delete;
  FixedKernels& operator=(const FixedKernels&) = delete;

 private:
  std::optional<GemmProvider> forced_;
};

// A tape that records no gradients, current while it lives, arguments read in place (the
// default at inference).
struct InferenceTape {
  InferenceTape() {
    set_read_rows_in_place(ReadRows::kWithoutGradients);
    tape.set_grad_enabled(false);
  }
  mutable Tape tape;
  TapeScope scope{tape};
};

// Memories of two source chunks ([5, 6, 4] and [3, 6, 4]) as the 4 items (rows) an engine's
// step reads: (source 1, row 2), (0, 4), (0, 1), (1, 0).
struct Memories {
  Var sources[2];
  Var items;
};

Memories memories(Tape& tape, bool trainable) {
  Memories m;
  const Tensor a = random_tensor({5, 6, 4}, 11), b = random_tensor({3, 6, 4}, 12);
  m.sources[0] = trainable ? tape.variable(a) : tape.constant(a);
  m.sources[1] = trainable ? tape.variable(b) : tape.constant(b);
  const Tensor refs =
      Tensor::from_vector(Shape{4, 2}, std::vector<std::int32_t>{1, 2, 0, 4, 0, 1, 1, 0});
  const std::int64_t width = 6 * 4;
  m.items = argument_rows(std::vector<Var>{m.sources[0], m.sources[1]}, refs, 4,
                          std::span(&width, 1), Shape{4, 6, 4});
  return m;
}

// Attention as the decoder's step computes it: scores = q · memoryᵀ, context = weights · memory.
struct Attention {
  std::vector<float> scores, context, grad_query, grad_sources[2];
  bool read_in_place = false;  // the items an argument read in place, still uncomputed after
};

Attention attend(ReadRows when, bool train) {
  set_read_rows_in_place(when);
  Tape tape;
  TapeScope scope(tape);
  tape.set_grad_enabled(train);
  const Memories m = memories(tape, train);
  Attention out;
  out.read_in_place = detail::reads_items_in_place(tape, m.items.id());
  // A rank-3 argument is never taken for a matrix by the ops that read [rows, width] in place.
  EXPECT_FALSE(detail::reads_in_place(tape, m.items.id()));
  const Var query = train ? tape.variable(random_tensor({4, 2, 4}, 13))
                          : tape.constant(random_tensor({4, 2, 4}, 13));
  const Var scores = batch_matmul(query, m.items, false, true);
  const Var context = batch_matmul(softmax(scores), m.items);
  out.read_in_place = out.read_in_place && detail::reads_items_in_place(tape, m.items.id());
  out.scores = scores.value().to_float_vector();
  out.context = context.value().to_float_vector();
  if (train) {
    tape.backward(
        context,
        Tensor::from_vector(context.shape(), random_tensor(context.shape(), 14).to_float_vector()));
    out.grad_query = query.grad().to_float_vector();
    for (int s = 0; s < 2; ++s) out.grad_sources[s] = m.sources[s].grad().to_float_vector();
  }
  return out;
}

TEST(BatchMatmulReadRows, ItemsWhereTheyLieEqualTheGatheredProductBitForBit) {
  const FixedKernels fixed;
  const Attention gathered = attend(ReadRows::kNever, false);
  const Attention in_place = attend(ReadRows::kWithoutGradients, false);
  EXPECT_FALSE(gathered.read_in_place);
  ASSERT_TRUE(in_place.read_in_place);
  EXPECT_EQ(in_place.scores, gathered.scores);
  EXPECT_EQ(in_place.context, gathered.context);
}

// In training with WEFT_READ_ROWS=1 the forward reads the items in place; the backward gathers
// them once and sends their gradient back to the sources' rows.
TEST(BatchMatmulReadRows, GradientsEqualTheGatheredProducts) {
  const FixedKernels fixed;
  const Attention gathered = attend(ReadRows::kNever, true);
  const Attention in_place = attend(ReadRows::kAlways, true);
  ASSERT_TRUE(in_place.read_in_place);
  EXPECT_EQ(in_place.context, gathered.context);
  EXPECT_EQ(in_place.grad_query, gathered.grad_query);
  for (int s = 0; s < 2; ++s) EXPECT_EQ(in_place.grad_sources[s], gathered.grad_sources[s]) << s;
}

TEST(BatchMatmulReadRows, ShapesAreCheckedWithoutGathering) {
  const FixedKernels fixed;
  const InferenceTape inference;
  Tape& tape = inference.tape;
  const Memories m = memories(tape, false);
  const Var wrong_inner = tape.constant(random_tensor({4, 2, 5}, 15));
  expect_error([&] { batch_matmul(wrong_inner, m.items, false, true); },
               {"[batch_matmul] inner dimensions differ: lhs [4, 2, 5] vs rhs [4, 6, 4]ᵀ"});
  const Var wrong_batch = tape.constant(random_tensor({3, 2, 4}, 16));
  expect_error([&] { batch_matmul(wrong_batch, m.items, false, true); },
               {"[batch_matmul] batch sizes differ", "(3 vs 4 matrices)"});
  EXPECT_TRUE(detail::reads_items_in_place(tape, m.items.id()));  // still not gathered
}

// The h and c halves of live examples' states [h | c] (a decoder step's first argument), as
// rows of two chunks in two column blocks of widths 3 and 5 (so a slice may span both), and a
// slice across the blocks: each slice's values and, in training, the chunks' gradients.
struct Halves {
  std::vector<std::vector<float>> values, grads;
  std::int64_t bytes_moved = 0;  // by gathers and copies, forward
  bool argument_never_gathered = false;
};

Halves slice_halves(ReadRows when, bool train) {
  set_read_rows_in_place(when);
  Tape tape;
  TapeScope scope(tape);
  tape.set_grad_enabled(train);
  const Var a =
      train ? tape.variable(random_tensor({5, 3}, 21)) : tape.constant(random_tensor({5, 3}, 21));
  const Var b =
      train ? tape.variable(random_tensor({3, 5}, 22)) : tape.constant(random_tensor({3, 5}, 22));
  // Block 0 (width 3) of rows from a, block 1 (width 5) from b: refs[p * rows + i].
  const Tensor refs = Tensor::from_vector(
      Shape{8, 2}, std::vector<std::int32_t>{0, 4, 0, 1, 0, 0, 0, 2, 1, 2, 1, 0, 1, 1, 1, 0});
  const std::int64_t widths[] = {3, 5};
  const bool was = set_work_profiling(true);
  const WorkProfile before = backend_counters().profile;
  const Var rows = argument_rows(std::vector<Var>{a, b}, refs, 4, widths, Shape{4, 8});
  const Var parts[] = {slice(rows, 1, 0, 4), slice(rows, 1, 4, 4), slice(rows, -1, 2, 3)};
  Halves out;
  for (const Var& part : parts) out.values.push_back(part.value().to_float_vector());
  const WorkProfile moved = backend_counters().profile - before;
  set_work_profiling(was);
  out.bytes_moved =
      moved.of(false, WorkKind::kGather).bytes + moved.of(false, WorkKind::kCopy).bytes;
  out.argument_never_gathered = detail::reads_in_place(tape, rows.id());
  if (train) {
    const Var loss = sum(parts[0] * parts[0]) + sum(parts[1] * 3.0f) + sum(parts[2] * parts[2]);
    tape.backward(loss);
    out.grads = {a.grad().to_float_vector(), b.grad().to_float_vector()};
  }
  return out;
}

TEST(SliceOfRowsInPlace, CopiesOnlyItsColumnsAndEqualsTheGatheredSlice) {
  const FixedKernels fixed;
  const Halves gathered = slice_halves(ReadRows::kNever, false);
  const Halves in_place = slice_halves(ReadRows::kWithoutGradients, false);
  EXPECT_EQ(in_place.values, gathered.values);
  EXPECT_TRUE(in_place.argument_never_gathered);
  // The gathered way copies the 4 x 8 rows, then each slice; in place only the slices' columns.
  EXPECT_EQ(gathered.bytes_moved, (4 * 8 + 4 * 11) * 4);
  EXPECT_EQ(in_place.bytes_moved, 4 * 11 * 4);
}

TEST(SliceOfRowsInPlace, GradientsReachTheRowsAsFromAGatheredArgument) {
  const FixedKernels fixed;
  const Halves gathered = slice_halves(ReadRows::kNever, true);
  const Halves in_place = slice_halves(ReadRows::kAlways, true);
  EXPECT_EQ(in_place.values, gathered.values);
  ASSERT_EQ(in_place.grads.size(), 2u);
  EXPECT_EQ(in_place.grads, gathered.grads);
}

TEST(SliceOfRowsInPlace, AnOutOfRangeSliceIsNamed) {
  const FixedKernels fixed;
  const InferenceTape inference;
  Tape& tape = inference.tape;
  const Var a = tape.constant(random_tensor({3, 6}, 23));
  const Tensor refs = Tensor::from_vector(Shape{2, 2}, std::vector<std::int32_t>{0, 2, 0, 0});
  const std::int64_t width = 6;
  const Var rows = argument_rows(std::vector<Var>{a}, refs, 2, std::span(&width, 1), Shape{2, 6});
  expect_error(
      [&] { slice(rows, 1, 4, 3); },
      {"[slice] range [4, 7) is out of bounds for extent 6 of float32 [2, 6] along axis 1"});
}

// A scrambled tiny decoding model (random weights of a larger scale, so its outputs vary in
// length) and its dev examples.
std::unique_ptr<models::Model> scrambled(const std::string& name) {
  models::OptionValues options = models::find_model(name).default_options();
  options.update(
      {{"hidden", 16}, {"max_depth", 3}, {"max_train", 6}, {"max_eval", 12}, {"seed", 11}}, "test");
  std::unique_ptr<models::Model> model = models::create_model(options);
  std::uint64_t seed = 100;
  for (Parameter p : model->parameters()) {
    p.value() = random_tensor(p.value().shape(), seed++, -0.8f, 0.8f);
    if (name == "seq2tree" && p.name() == "decoder/scores/bias")
      for (int op = 10; op < 13; ++op) p.value().data<float>()[op] += 3.5f;  // trees grow
  }
  return model;
}

struct Decoded {
  std::vector<nlohmann::json> answers;
  std::int64_t gathered_bytes = 0, steps = 0;
};

Decoded decode(models::DecodingModel& decoder, std::span<const nlohmann::json> examples,
               ReadRows when, int beam) {
  set_read_rows_in_place(when);
  const bool was = set_work_profiling(true);
  const WorkProfile before = backend_counters().profile;
  Decoded out;
  std::vector<std::int64_t> steps;
  out.answers = decoder.decode(examples, models::DecodeSettings{.beam = beam}, &steps);
  out.gathered_bytes = (backend_counters().profile - before).of(false, WorkKind::kGather).bytes;
  set_work_profiling(was);
  for (std::int64_t s : steps) out.steps = std::max(out.steps, s);
  return out;
}

class DecodersInPlace : public ::testing::TestWithParam<std::string> {};

TEST_P(DecodersInPlace, AnswersAndLogProbabilitiesEqualGatheredBitForBit) {
  const FixedKernels fixed;
  const std::unique_ptr<models::Model> model = scrambled(GetParam());
  models::DecodingModel& decoder = *model->decoding();
  const std::span<const nlohmann::json> examples = model->examples(train::Split::kDev);
  for (int beam : {0, 3}) {
    const Decoded gathered = decode(decoder, examples, ReadRows::kNever, beam);
    const Decoded in_place = decode(decoder, examples, ReadRows::kWithoutGradients, beam);
    ASSERT_EQ(in_place.answers.size(), examples.size());
    std::set<std::size_t> lengths;
    for (std::size_t e = 0; e < examples.size(); ++e) {
      // Whole answers, log-probabilities and scores as doubles, compared exactly.
      EXPECT_EQ(in_place.answers[e], gathered.answers[e]) << "beam " << beam << " example " << e;
      lengths.insert(in_place.answers[e]["length"].get<std::size_t>());
    }
    EXPECT_GT(lengths.size(), 1u);  // rows ended at different steps: live rows were a subset
    // The memories of the live examples are no longer copied each step (the same steps ran;
    // the encoder's gathers, the same in both, are counted too).
    EXPECT_EQ(in_place.steps, gathered.steps);
    EXPECT_LT(in_place.gathered_bytes * 4, gathered.gathered_bytes * 3) << "beam " << beam;
  }
}

TEST_P(DecodersInPlace, ABatchReadInPlaceDecodesAsItsExamplesAlone) {
  const FixedKernels fixed;
  const std::unique_ptr<models::Model> model = scrambled(GetParam());
  models::DecodingModel& decoder = *model->decoding();
  const std::span<const nlohmann::json> examples = model->examples(train::Split::kDev);
  const Decoded together = decode(decoder, examples, ReadRows::kWithoutGradients, 0);
  for (std::size_t e = 0; e < examples.size(); ++e) {
    const Decoded alone = decode(decoder, examples.subspan(e, 1), ReadRows::kWithoutGradients, 0);
    EXPECT_EQ(together.answers[e]["text"], alone.answers[0]["text"]) << e;
    EXPECT_EQ(together.answers[e]["length"], alone.answers[0]["length"]) << e;
    // A batch's products may round otherwise than one row's (not the batch-invariant mode).
    EXPECT_NEAR(together.answers[e]["log_prob"].get<double>(),
                alone.answers[0]["log_prob"].get<double>(), 1e-4)
        << e;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, DecodersInPlace, ::testing::Values("tree2seq", "seq2tree"));

}  // namespace
}  // namespace weft::testing
