// Greedy and beam search over a Decoder, written as flow programs. Ties are broken by beam
// then token order, so width 1 is exactly greedy decoding (which takes the lowest argmax).
#include "weft/flow/search.h"

#include <algorithm>
#include <cmath>

#include "weft/core/error.h"

namespace weft::flow {
namespace {

void check_decoder(const Decoder& decoder, const char* where) {
  if (!decoder.step) fail(where, "the decoder has no step function");
  if (decoder.max_length <= 0)
    fail(where, "the decoder's max_length must be positive, got ", decoder.max_length);
}

// The log-probabilities read from a step, as float64 on the host.
std::vector<double> log_probs_of(const Tensor& row, const char* where) {
  if (row.dtype() != DType::kFloat32 || row.rank() != 1)
    fail(where, "log_probs must be float32 [vocabulary], got ", row.describe());
  return row.to_double_vector();
}

struct Beam {
  Val state;
  std::vector<std::int32_t> tokens;
  double log_prob = 0;
};

struct Candidate {
  double log_prob;
  std::uint32_t beam;
  std::int32_t token;
};

Hypothesis finished(const Beam& beam, double length_penalty, bool ended) {
  Hypothesis h{beam.tokens, beam.log_prob, 0.0, ended};
  h.score = normalised_score(h.log_prob, h.tokens.size(), length_penalty);
  return h;
}

// Picks the next beams from the ranked candidates (see beam_program).
std::vector<Beam> next_beams(const std::vector<Candidate>& ranked, const std::vector<Beam>& beams,
                             const std::vector<DecoderStep>& steps, const Decoder& decoder,
                             const BeamOptions& options, std::vector<Hypothesis>& ended) {
  const std::size_t width = std::size_t(options.width);
  std::vector<Beam> next;
  for (std::size_t rank = 0; rank < ranked.size() && next.size() < width; ++rank) {
    const Candidate& c = ranked[rank];
    Beam beam{steps[c.beam].state, beams[c.beam].tokens, c.log_prob};
    beam.tokens.push_back(c.token);
    if (c.token != decoder.end_token)
      next.push_back(std::move(beam));
    else if (rank < width)
      ended.push_back(finished(beam, options.length_penalty, true));
  }
  return next;
}

}  // namespace

double normalised_score(double log_prob, std::size_t length, double length_penalty) {
  if (length_penalty == 0.0 || length == 0) return log_prob;
  return log_prob / std::pow(double(length), length_penalty);
}

Program greedy_program(Context& ctx, const Decoder& decoder, Val initial, Hypothesis& out) {
  check_decoder(decoder, "greedy");
  out = Hypothesis{};
  Val state = initial;
  std::int32_t token = decoder.start_token;
  for (std::int32_t length = 0; length < decoder.max_length && !out.ended; ++length) {
    const DecoderStep step = decoder.step(ctx, state, token);
    const std::vector<double> log_probs = log_probs_of(co_await ctx.read(step.log_probs), "greedy");
    const auto best = std::max_element(log_probs.begin(), log_probs.end());
    token = std::int32_t(best - log_probs.begin());
    out.tokens.push_back(token);
    out.log_prob += *best;
    out.ended = token == decoder.end_token;
    state = step.state;
  }
  out.score = normalised_score(out.log_prob, out.tokens.size(), 0.0);
}

Program beam_program(Context& ctx, const Decoder& decoder, Val initial, BeamOptions options,
                     std::vector<Hypothesis>& out) {
  check_decoder(decoder, "beam");
  if (options.width <= 0) fail("beam", "the width must be positive, got ", options.width);
  out.clear();
  std::vector<Beam> beams{Beam{initial, {}, 0.0}};
  for (std::int32_t length = 1; length <= decoder.max_length && !beams.empty(); ++length) {
    // Every beam's step is issued before the first read: one engine step runs them all.
    std::vector<DecoderStep> steps;
    for (const Beam& beam : beams) {
      const std::int32_t last = beam.tokens.empty() ? decoder.start_token : beam.tokens.back();
      steps.push_back(decoder.step(ctx, beam.state, last));
    }
    std::vector<Candidate> ranked;
    for (std::uint32_t b = 0; b < steps.size(); ++b) {
      const std::vector<double> log_probs =
          log_probs_of(co_await ctx.read(steps[b].log_probs), "beam");
      for (std::size_t t = 0; t < log_probs.size(); ++t)
        ranked.push_back({beams[b].log_prob + log_probs[t], b, std::int32_t(t)});
    }
    std::stable_sort(ranked.begin(), ranked.end(), [](const Candidate& x, const Candidate& y) {
      return x.log_prob > y.log_prob;
    });
    beams = next_beams(ranked, beams, steps, decoder, options, out);
    if (out.size() >= std::size_t(options.width)) break;
  }
  // Beams still live here stopped at max_length (an early stop leaves `width` ended ones).
  if (out.size() < std::size_t(options.width))
    for (const Beam& beam : beams) out.push_back(finished(beam, options.length_penalty, false));
  std::stable_sort(out.begin(), out.end(),
                   [](const Hypothesis& x, const Hypothesis& y) { return x.score > y.score; });
  if (out.size() > std::size_t(options.width)) out.resize(std::size_t(options.width));
}

std::vector<Hypothesis> greedy_decode(Engine& engine, const Decoder& decoder,
                                      std::span<const Val> initial) {
  std::vector<Hypothesis> out(initial.size());
  std::vector<std::size_t> examples;
  for (std::size_t e = 0; e < initial.size(); ++e)
    examples.push_back(engine.admit(
        [&, e](Context& ctx) { return greedy_program(ctx, decoder, initial[e], out[e]); }));
  engine.run();
  for (std::size_t e = 0; e < initial.size(); ++e)
    if (engine.state(examples[e]) == ProgramState::kFailed) out[e] = Hypothesis{};
  return out;
}

std::vector<std::vector<Hypothesis>> beam_search(Engine& engine, const Decoder& decoder,
                                                 std::span<const Val> initial,
                                                 BeamOptions options) {
  std::vector<std::vector<Hypothesis>> out(initial.size());
  std::vector<std::size_t> examples;
  for (std::size_t e = 0; e < initial.size(); ++e)
    examples.push_back(engine.admit(
        [&, e](Context& ctx) { return beam_program(ctx, decoder, initial[e], options, out[e]); }));
  engine.run();
  for (std::size_t e = 0; e < initial.size(); ++e)
    if (engine.state(examples[e]) == ProgramState::kFailed) out[e].clear();
  return out;
}

}  // namespace weft::flow
