// Searches over flow programs: beam search wide enough to keep every prefix equals exhaustive
// search (every token sequence scored by teacher forcing), with and without length
// normalisation; width 1 equals greedy decoding; examples and beams batch into shared steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "float32_tolerance.h"
#include "op_test_util.h"
#include "weft/autodiff/ops.h"
#include "weft/flow/search.h"

namespace weft::flow::testing {
namespace {

using weft::testing::float32_tolerance;
using weft::testing::random_tensor;

constexpr std::int32_t kVocabulary = 3;  // token 0 ends; 1 and 2 are words
constexpr std::int32_t kStart = 1;

constexpr std::size_t kGroup = 3;  // beams per call of TinyDecoder's step_beams

// A tiny recurrent decoder: state' = tanh(state·w + onehot(token)·u), log_softmax(state'·o).
// With `grouped`, it also steps beams kGroup at a time (the last group padded with copies of
// its last beam), as a model's decoder does to share one call and one read among beams.
struct TinyDecoder {
  Parameter w{"w", random_tensor({4, 4}, 61, -1.5f, 1.5f)};
  Parameter u{"u", random_tensor({kVocabulary, 4}, 62, -1.5f, 1.5f)};
  Parameter o{"o", random_tensor({4, kVocabulary}, 63, -2.0f, 2.0f)};
  loom::Loom loom;
  TypeId state = 0, token = 0, tokens = 0;
  OpId step_op = 0, group_op = 0;
  Decoder decoder;

  // [rows, 4] states and [rows, kVocabulary] one-hot tokens -> next states, log-probabilities.
  std::vector<Var> cell(Var s, Var onehot) const {
    Tape& t = Tape::current();
    Var next = tanh(matmul(s, t.parameter(w)) + matmul(onehot, t.parameter(u)));
    return {next, log_softmax(matmul(next, t.parameter(o)))};
  }

  explicit TinyDecoder(std::int32_t max_length, bool grouped = false) {
    const loom::TypeShape state_type{DType::kFloat32, {4}, "state"};
    const loom::TypeShape token_type{DType::kFloat32, {kVocabulary}, "token"};
    const loom::TypeShape log_probs_type{DType::kFloat32, {kVocabulary}, "log_probs"};
    step_op = loom.add_operation("step", {state_type, token_type}, {state_type, log_probs_type},
                                 [this](auto in) { return cell(in[0], in[1]); });
    state = loom.type_id(state_type);
    token = loom.type_id(token_type);
    decoder.step = [this](Context& ctx, Val s, std::int32_t previous) {
      float onehot[kVocabulary] = {};
      onehot[previous] = 1;
      const auto outs = ctx.call(step_op, {s, ctx.constant(token, onehot)});
      return DecoderStep{outs[0], outs[1]};
    };
    decoder.start_token = kStart;
    decoder.end_token = 0;
    decoder.max_length = max_length;
    if (grouped) add_grouped_step(state_type);
  }

  void add_grouped_step(const loom::TypeShape& state_type) {
    const std::int64_t g = std::int64_t(kGroup);
    const loom::TypeShape tokens_type{DType::kFloat32, {g, kVocabulary}, "tokens"};
    std::vector<loom::TypeShape> in_types(kGroup, state_type), out_types(kGroup, state_type);
    in_types.push_back(tokens_type);
    out_types.push_back(loom::TypeShape{DType::kFloat32, {g, kVocabulary}, "group_log_probs"});
    group_op =
        loom.add_operation("group_step", in_types, out_types, [this](std::span<const Var> x) {
          const std::int64_t n = x[0].shape()[0], rows = std::int64_t(kGroup);
          const std::vector<Var> y = cell(reshape(concat(x.first(kGroup)), {n * rows, 4}),
                                          reshape(x[kGroup], {n * rows, kVocabulary}));
          const Var states = reshape(y[0], {n, rows * 4});
          std::vector<Var> outs;
          for (std::int64_t b = 0; b < rows; ++b) outs.push_back(slice(states, 1, 4 * b, 4));
          outs.push_back(reshape(y[1], {n, rows, kVocabulary}));
          return outs;
        });
    tokens = loom.type_id(tokens_type);
    decoder.step_beams = [this](Context& ctx, std::span<const Val> states,
                                std::span<const std::int32_t> previous) {
      BeamStep step;
      for (std::size_t first = 0; first < states.size(); first += kGroup) {
        std::vector<Val> args;
        std::vector<float> onehot(kGroup * kVocabulary, 0.f);
        for (std::size_t b = 0; b < kGroup; ++b) {
          const std::size_t beam = std::min(first + b, states.size() - 1);  // padding repeats
          args.push_back(states[beam]);
          onehot[b * kVocabulary + std::size_t(previous[beam])] = 1;
        }
        args.push_back(ctx.constant(tokens, onehot));
        const auto outs = ctx.call(group_op, args);
        for (std::size_t b = 0; b < kGroup && first + b < states.size(); ++b)
          step.states.push_back(outs[b]);
        step.log_probs.push_back(outs[kGroup]);
      }
      return step;
    };
  }
};

// Scores a given token sequence by teacher forcing: the sum of its tokens' log-probabilities.
Program score_sequence(Context& ctx, const Decoder& decoder, Val state,
                       std::vector<std::int32_t> tokens, double& log_prob) {
  std::int32_t previous = decoder.start_token;
  log_prob = 0;
  for (std::int32_t t : tokens) {
    const DecoderStep step = decoder.step(ctx, state, previous);
    log_prob += (co_await ctx.read(step.log_probs)).to_double_vector()[std::size_t(t)];
    state = step.state;
    previous = t;
  }
}

// Every hypothesis a search can return: sequences of words ending in the end token, or
// max_length words long.
std::vector<std::vector<std::int32_t>> every_sequence(std::int32_t max_length) {
  std::vector<std::vector<std::int32_t>> out, prefixes{{}};
  for (std::int32_t length = 1; length <= max_length; ++length) {
    std::vector<std::vector<std::int32_t>> longer;
    for (const auto& p : prefixes) {
      auto ended = p;
      ended.push_back(0);
      out.push_back(ended);
      for (std::int32_t word = 1; word < kVocabulary; ++word) {
        auto next = p;
        next.push_back(word);
        longer.push_back(next);
      }
    }
    prefixes = longer;
  }
  out.insert(out.end(), prefixes.begin(), prefixes.end());
  return out;
}

// Exhaustive search for each initial state: every sequence scored (one batch), ranked.
std::vector<std::vector<Hypothesis>> exhaustive(TinyDecoder& m, const Tensor& initial,
                                                double length_penalty) {
  const auto sequences = every_sequence(m.decoder.max_length);
  Tape tape;
  Engine engine(m.loom, tape);
  const std::vector<Val> states = engine.import(tape.variable(initial), m.state);
  std::vector<std::vector<Hypothesis>> out(states.size());
  for (auto& hypotheses : out)
    for (const auto& s : sequences) hypotheses.push_back(Hypothesis{s, 0, 0, s.back() == 0});
  for (std::size_t e = 0; e < states.size(); ++e)
    for (Hypothesis& h : out[e])
      engine.admit([&, e](Context& ctx) {
        return score_sequence(ctx, m.decoder, states[e], h.tokens, h.log_prob);
      });
  engine.run();
  for (auto& hypotheses : out) {
    for (Hypothesis& h : hypotheses)
      h.score = normalised_score(h.log_prob, h.tokens.size(), length_penalty);
    std::stable_sort(hypotheses.begin(), hypotheses.end(),
                     [](const Hypothesis& x, const Hypothesis& y) { return x.score > y.score; });
  }
  return out;
}

// Scores of one hypothesis computed in batches of another composition (the search's shared
// steps against exhaustive teacher forcing) agree to float32 rounding, one rounding per token.
double score_tolerance(const Hypothesis& h) {
  return float32_tolerance(h.log_prob, int(h.tokens.size()) + 1);
}

void expect_same(const Hypothesis& got, const Hypothesis& want, const std::string& where) {
  EXPECT_EQ(got.tokens, want.tokens) << where;
  EXPECT_NEAR(got.log_prob, want.log_prob, score_tolerance(want)) << where;
  EXPECT_NEAR(got.score, want.score, score_tolerance(want)) << where;
  EXPECT_EQ(got.ended, want.ended) << where;
}

// Each search test runs with the decoder stepping beam by beam and with it stepping them in
// groups (Decoder::step_beams).
class FlowSearch : public ::testing::TestWithParam<bool> {};

TEST_P(FlowSearch, AWideBeamEqualsExhaustiveSearch) {
  TinyDecoder m(4, GetParam());
  const Tensor initial = random_tensor({6, 4}, 64, -2.0f, 2.0f);
  const std::size_t count = every_sequence(4).size();  // 15 ended, 16 at max_length
  ASSERT_EQ(count, 31u);
  for (double penalty : {0.0, 0.7, 1.0}) {
    const auto want = exhaustive(m, initial, penalty);
    Tape tape;
    Engine engine(m.loom, tape);
    const std::vector<Val> states = engine.import(tape.variable(initial), m.state);
    const auto got = beam_search(engine, m.decoder, states, BeamOptions{int(count), penalty});
    for (std::size_t e = 0; e < states.size(); ++e) {
      ASSERT_EQ(got[e].size(), count);
      for (std::size_t k = 0; k < count; ++k)
        expect_same(got[e][k], want[e][k],
                    "penalty " + std::to_string(penalty) + ", example " + std::to_string(e) +
                        ", rank " + std::to_string(k));
    }
    // Every example's beams went through shared steps: one per length.
    EXPECT_EQ(engine.stats().steps, 4);
  }
}

TEST_P(FlowSearch, ANarrowBeamReturnsTrueScoresAndFindsNoBetterThanExhaustive) {
  TinyDecoder m(5, GetParam());
  const Tensor initial = random_tensor({8, 4}, 65, -2.0f, 2.0f);
  const auto want = exhaustive(m, initial, 0.0);
  Tape tape;
  Engine engine(m.loom, tape);
  const std::vector<Val> states = engine.import(tape.variable(initial), m.state);
  const auto got = beam_search(engine, m.decoder, states, BeamOptions{3, 0.0});
  for (std::size_t e = 0; e < states.size(); ++e) {
    ASSERT_FALSE(got[e].empty());
    EXPECT_LE(got[e].size(), 3u);
    // No better than the best of all sequences (the beam's best may be that one, computed in
    // other batches: equal up to rounding).
    EXPECT_LE(got[e][0].score, want[e][0].score + score_tolerance(want[e][0]));
    std::map<std::vector<std::int32_t>, double> truth;
    for (const Hypothesis& h : want[e]) truth[h.tokens] = h.log_prob;
    for (const Hypothesis& h : got[e])
      EXPECT_NEAR(h.log_prob, truth.at(h.tokens), score_tolerance(h));
  }
  EXPECT_LE(engine.stats().steps, 5);
  // Beams of every example share steps: 8 examples' 3 beams, one call each or one for all.
  if (GetParam())
    EXPECT_LE(engine.stats().calls, 8 * engine.stats().steps);
  else
    EXPECT_GT(engine.stats().mean_calls_per_step(), 8.0);
}

TEST_P(FlowSearch, WidthOneIsGreedyDecoding) {
  TinyDecoder m(6, GetParam());
  const Tensor initial = random_tensor({40, 4}, 66, -2.0f, 2.0f);
  std::vector<Hypothesis> greedy;
  std::vector<std::vector<Hypothesis>> beam;
  {
    Tape tape;
    Engine engine(m.loom, tape);
    greedy = greedy_decode(engine, m.decoder, engine.import(tape.variable(initial), m.state));
  }
  {
    Tape tape;
    Engine engine(m.loom, tape);
    beam = beam_search(engine, m.decoder, engine.import(tape.variable(initial), m.state),
                       BeamOptions{1, 0.0});
  }
  std::size_t ended = 0;
  for (std::size_t e = 0; e < greedy.size(); ++e) {
    ASSERT_EQ(beam[e].size(), 1u);
    expect_same(beam[e][0], greedy[e], "example " + std::to_string(e));
    ended += greedy[e].ended;
  }
  EXPECT_GT(ended, 0u);  // some examples stopped early, so lengths differed in the batch
  EXPECT_LT(ended, greedy.size());
}

INSTANTIATE_TEST_SUITE_P(StepByBeamAndGrouped, FlowSearch, ::testing::Bool());

// A decoder whose probabilities of "end" (token 0) and "a" (1) depend only on the position
// (the state is its one-hot): table[p] at position p, three positions.
using PositionTable = std::array<std::array<float, 2>, 3>;
struct PositionDecoder {
  loom::Loom loom;
  TypeId state = 0;
  OpId step_op = 0;
  Decoder decoder;

  explicit PositionDecoder(PositionTable probabilities) {
    const loom::TypeShape state_type{DType::kFloat32, {4}, "position"};
    const loom::TypeShape log_probs_type{DType::kFloat32, {2}, "log_probs"};
    step_op = loom.add_operation(
        "step", {state_type}, {state_type, log_probs_type},
        [probabilities](std::span<const Var> in) {
          std::vector<float> table(8, 0.f), shift(16, 0.f);
          for (std::size_t p = 0; p < 3; ++p)
            for (std::size_t t = 0; t < 2; ++t) table[p * 2 + t] = std::log(probabilities[p][t]);
          for (std::size_t p = 0; p + 1 < 4; ++p) shift[p * 4 + p + 1] = 1.f;
          Tape& tape = Tape::current();
          const Var log_probs = matmul(in[0], tape.constant(Tensor::from_vector({4, 2}, table)));
          return std::vector<Var>{matmul(in[0], tape.constant(Tensor::from_vector({4, 4}, shift))),
                                  log_probs};
        });
    state = loom.type_id(state_type);
    decoder.step = [this](Context& ctx, Val s, std::int32_t) {
      const auto outs = ctx.call(step_op, {s});
      return DecoderStep{outs[0], outs[1]};
    };
    decoder.end_token = 0;
    decoder.max_length = 3;
  }
};

// The best hypothesis of a beam search of `width` over `m` (its kept ones checked).
Hypothesis best_of_beam(PositionDecoder& m, int width, double penalty) {
  Tape tape;
  Engine engine(m.loom, tape);
  const Tensor start = Tensor::from_vector({1, 4}, std::vector<float>{1, 0, 0, 0});
  const auto got = beam_search(engine, m.decoder, engine.import(tape.variable(start), m.state),
                               BeamOptions{width, penalty});
  EXPECT_FALSE(got[0].empty()) << engine.error(0);
  for (const Hypothesis& h : got[0])
    EXPECT_NEAR(h.score, h.log_prob / std::pow(double(h.tokens.size()), penalty), 1e-9);
  for (std::size_t k = 1; k < got[0].size(); ++k) EXPECT_GE(got[0][k - 1].score, got[0][k].score);
  return got[0].empty() ? Hypothesis{} : got[0][0];
}

// "end" at once has probability 0.5; "a a end" 0.5 * 0.8 * 0.8 = 0.32; "a end" 0.5 * 0.2.
TEST(FlowSearchLengthPenalty, ChangesTheRankingAsTheFormulaSays) {
  PositionDecoder m(PositionTable{{{0.5f, 0.5f}, {0.2f, 0.8f}, {0.8f, 0.2f}}});
  const auto best = [&](double penalty) { return best_of_beam(m, 3, penalty); };
  // The plain sum prefers the short hypothesis: log 0.5 > log 0.32.
  const Hypothesis plain = best(0.0);
  EXPECT_EQ(plain.tokens, (std::vector<std::int32_t>{0}));
  EXPECT_NEAR(plain.score, std::log(0.5), 1e-6);
  // Penalty 1 ranks by the mean log-probability per token: log(0.32) / 3 > log(0.5) / 1.
  const Hypothesis mean = best(1.0);
  EXPECT_EQ(mean.tokens, (std::vector<std::int32_t>{1, 1, 0}));
  EXPECT_NEAR(mean.log_prob, std::log(0.32), 1e-6);
  EXPECT_NEAR(mean.score, std::log(0.32) / 3, 1e-6);
}

// Two unlikely hypotheses end early ("end": 0.1; "a end": 0.9 * 0.05) while the likely one is
// still being written ("a a end": 0.9 * 0.95 * 0.99): a beam of 2 must not stop once two
// have ended, but when no live one can beat them.
TEST(FlowSearchStopping, ALikelyHypothesisStillBeingWrittenIsNotDropped) {
  PositionDecoder m(PositionTable{{{0.1f, 0.9f}, {0.05f, 0.95f}, {0.99f, 0.01f}}});
  const Hypothesis got = best_of_beam(m, 2, 0.0);
  EXPECT_EQ(got.tokens, (std::vector<std::int32_t>{1, 1, 0}));
  EXPECT_NEAR(got.log_prob, std::log(0.9 * 0.95 * 0.99), 1e-6);
}

TEST(FlowSearchStopping, StopsWhenNoLiveHypothesisCanBeatTheKeptOnes) {
  const std::vector<double> kept{-1.0, -3.0, -2.0};
  EXPECT_FALSE(search_finished(std::span(kept).first(1), -5.0, 2, 10, 0.0));  // too few kept
  EXPECT_TRUE(search_finished(kept, -2.0, 2, 10, 0.0));   // ties the 2nd best: cannot beat it
  EXPECT_FALSE(search_finished(kept, -1.5, 2, 10, 0.0));  // may still beat -2
  // With a penalty the live one may still gain: -4 over 10 tokens scores -0.4 > -2 / 1.
  EXPECT_FALSE(search_finished(kept, -4.0, 2, 10, 1.0));
  EXPECT_TRUE(search_finished(kept, -40.0, 2, 10, 1.0));
}

TEST(FlowSearchErrors, BadOptionsFailTheirProgramsByMessage) {
  TinyDecoder m(3);
  Tape tape;
  Engine engine(m.loom, tape);
  const std::vector<Val> states = engine.import(tape.variable(random_tensor({1, 4}, 67)), m.state);
  const auto out = beam_search(engine, m.decoder, states, BeamOptions{0, 0.0});
  EXPECT_TRUE(out[0].empty());
  EXPECT_NE(engine.error(0).find("[beam] the width must be positive, got 0"), std::string::npos)
      << engine.error(0);
  Decoder broken = m.decoder;
  broken.max_length = 0;
  greedy_decode(engine, broken, states);
  EXPECT_NE(engine.error(1).find("[greedy] the decoder's max_length must be positive"),
            std::string::npos)
      << engine.error(1);
  // A step_beams whose log-probabilities cover fewer beams than it was given.
  Decoder short_rows = m.decoder;
  short_rows.step_beams = [&](Context& ctx, std::span<const Val> s,
                              std::span<const std::int32_t> tokens) {
    BeamStep step;
    for (std::size_t b = 0; b < s.size(); ++b) {
      const DecoderStep one = m.decoder.step(ctx, s[b], tokens[b]);
      step.states.push_back(one.state);
      if (b == 0) step.log_probs.push_back(one.log_probs);
    }
    return step;
  };
  EXPECT_TRUE(beam_search(engine, short_rows, states, BeamOptions{2, 0.0})[0].empty());
  EXPECT_NE(engine.error(2).find("[beam] the step's log_probs have rows for 1 of 2 beams"),
            std::string::npos)
      << engine.error(2);
}

}  // namespace
}  // namespace weft::flow::testing
