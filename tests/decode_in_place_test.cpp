// Issue 42 item 5: decoders read each example's memory where it lies. batch_matmul with an
// operand whose items are an argument's rows (argument_rows, read in place) equals the product
// of the gathered copy bit for bit, forward and backward; tree2seq and seq2tree decode the same
// answers and log-probabilities, bit for bit, with arguments read in place and gathered
// (WEFT_READ_ROWS 0 / auto), batched as one at a time, moving fewer bytes per step.
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
  set_read_rows_in_place(ReadRows::kWithoutGradients);
  Tape tape;
  TapeScope scope(tape);
  tape.set_grad_enabled(false);
  const Memories m = memories(tape, false);
  const Var wrong_inner = tape.constant(random_tensor({4, 2, 5}, 15));
  expect_error([&] { batch_matmul(wrong_inner, m.items, false, true); },
               {"[batch_matmul] inner dimensions differ: lhs [4, 2, 5] vs rhs [4, 6, 4]ᵀ"});
  const Var wrong_batch = tape.constant(random_tensor({3, 2, 4}, 16));
  expect_error([&] { batch_matmul(wrong_batch, m.items, false, true); },
               {"[batch_matmul] batch sizes differ", "(3 vs 4 matrices)"});
  EXPECT_TRUE(detail::reads_items_in_place(tape, m.items.id()));  // still not gathered
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
