// Searches over flow programs: beam search wide enough to keep every prefix equals exhaustive
// search (every token sequence scored by teacher forcing), with and without length
// normalisation; width 1 equals greedy decoding; examples and beams batch into shared steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "op_test_util.h"
#include "weft/autodiff/ops.h"
#include "weft/flow/search.h"

namespace weft::flow::testing {
namespace {

using weft::testing::random_tensor;

constexpr std::int32_t kVocabulary = 3;  // token 0 ends; 1 and 2 are words
constexpr std::int32_t kStart = 1;

// A tiny recurrent decoder: state' = tanh(state·w + onehot(token)·u), log_softmax(state'·o).
struct TinyDecoder {
  Parameter w{"w", random_tensor({4, 4}, 61, -1.5f, 1.5f)};
  Parameter u{"u", random_tensor({kVocabulary, 4}, 62, -1.5f, 1.5f)};
  Parameter o{"o", random_tensor({4, kVocabulary}, 63, -2.0f, 2.0f)};
  loom::Loom loom;
  TypeId state = 0, token = 0;
  OpId step_op = 0;
  Decoder decoder;

  explicit TinyDecoder(std::int32_t max_length) {
    const loom::TypeShape state_type{DType::kFloat32, {4}, "state"};
    const loom::TypeShape token_type{DType::kFloat32, {kVocabulary}, "token"};
    const loom::TypeShape log_probs_type{DType::kFloat32, {kVocabulary}, "log_probs"};
    step_op = loom.add_operation(
        "step", {state_type, token_type}, {state_type, log_probs_type}, [this](auto in) {
          Tape& t = Tape::current();
          Var s = tanh(matmul(in[0], t.parameter(w)) + matmul(in[1], t.parameter(u)));
          return std::vector<Var>{s, log_softmax(matmul(s, t.parameter(o)))};
        });
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

void expect_same(const Hypothesis& got, const Hypothesis& want, const std::string& where) {
  EXPECT_EQ(got.tokens, want.tokens) << where;
  EXPECT_NEAR(got.log_prob, want.log_prob, 1e-5) << where;
  EXPECT_NEAR(got.score, want.score, 1e-5) << where;
  EXPECT_EQ(got.ended, want.ended) << where;
}

TEST(FlowSearch, AWideBeamEqualsExhaustiveSearch) {
  TinyDecoder m(4);
  const Tensor initial = random_tensor({6, 4}, 64, -2.0f, 2.0f);
  const std::size_t count = every_sequence(4).size();  // 15 ended, 16 at max_length
  ASSERT_EQ(count, 31u);
  for (double penalty : {0.0, 0.7}) {
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

TEST(FlowSearch, ANarrowBeamReturnsTrueScoresAndFindsNoBetterThanExhaustive) {
  TinyDecoder m(5);
  const Tensor initial = random_tensor({8, 4}, 65, -2.0f, 2.0f);
  const auto want = exhaustive(m, initial, 0.0);
  Tape tape;
  Engine engine(m.loom, tape);
  const std::vector<Val> states = engine.import(tape.variable(initial), m.state);
  const auto got = beam_search(engine, m.decoder, states, BeamOptions{3, 0.0});
  for (std::size_t e = 0; e < states.size(); ++e) {
    ASSERT_FALSE(got[e].empty());
    EXPECT_LE(got[e].size(), 3u);
    EXPECT_LE(got[e][0].score, want[e][0].score + 1e-9);
    std::map<std::vector<std::int32_t>, double> truth;
    for (const Hypothesis& h : want[e]) truth[h.tokens] = h.log_prob;
    for (const Hypothesis& h : got[e]) EXPECT_NEAR(h.log_prob, truth.at(h.tokens), 1e-5);
  }
  EXPECT_LE(engine.stats().steps, 5);
  EXPECT_GT(engine.stats().mean_calls_per_step(), 8.0);  // beams of every example share steps
}

TEST(FlowSearch, WidthOneIsGreedyDecoding) {
  TinyDecoder m(6);
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

TEST(FlowSearch, BadOptionsFailTheirProgramsByMessage) {
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
}

}  // namespace
}  // namespace weft::flow::testing
