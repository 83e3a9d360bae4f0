// Greedy and beam search over a Decoder, written as flow programs. Ties are broken by beam
// then token order, so width 1 is exactly greedy decoding (which takes the lowest argmax).
#include "weft/flow/search.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "weft/core/error.h"

namespace weft::flow {
namespace {

void check_decoder(const Decoder& decoder, const char* where) {
  if (!decoder.step) fail(where, "the decoder has no step function");
  if (decoder.max_length <= 0)
    fail(where, "the decoder's max_length must be positive, got ", decoder.max_length);
}

// The best token of a step's log-probabilities (the lowest index among equals), read in place.
std::pair<std::int32_t, double> argmax_of(const Tensor& row, const char* where) {
  if (row.dtype() != DType::kFloat32 || row.rank() != 1 || row.numel() == 0)
    fail(where, "log_probs must be float32 [vocabulary], got ", row.describe());
  const float* data = row.data<float>();
  const float* best = std::max_element(data, data + row.numel());
  return {std::int32_t(best - data), double(*best)};
}

// Admits one program per example, runs them all, and calls `clear(e)` for each that failed.
template <typename Make, typename Clear>
void run_each(Engine& engine, std::size_t examples, const Make& make, const Clear& clear) {
  std::vector<std::size_t> ids;
  for (std::size_t e = 0; e < examples; ++e)
    ids.push_back(engine.admit([&make, e](Context& ctx) { return make(ctx, e); }));
  engine.run();
  for (std::size_t e = 0; e < examples; ++e)
    if (engine.state(ids[e]) == ProgramState::kFailed) clear(e);
}

struct Beam {
  Val state;
  std::vector<std::int32_t> tokens;
  double log_prob = 0;
};

Hypothesis finished(const Beam& beam, double length_penalty, bool ended) {
  Hypothesis h{beam.tokens, beam.log_prob, 0.0, ended};
  h.score = normalised_score(h.log_prob, h.tokens.size(), length_penalty);
  return h;
}

// Ranks expansions best first; ties by beam, then token (what a stable sort by score of the
// expansions in beam-major order gives). A type rather than a function, so the sort inlines it.
struct Better {
  bool operator()(const RankedExpansions::Expansion& x,
                  const RankedExpansions::Expansion& y) const {
    if (x.log_prob != y.log_prob) return x.log_prob > y.log_prob;
    return x.beam != y.beam ? x.beam < y.beam : x.token < y.token;
  }
};

// What one step of every live beam needs from the search: their states and last tokens.
struct StepInputs {
  std::vector<Val> states;
  std::vector<std::int32_t> tokens;
  std::vector<double> log_probs;
};

// Issues one step of every live beam: through step_beams when the decoder has it, else one
// step per beam.
BeamStep issue_step(Context& ctx, const Decoder& decoder, const std::vector<Beam>& beams,
                    StepInputs& in) {
  in.states.clear();
  in.tokens.clear();
  in.log_probs.clear();
  for (const Beam& beam : beams) {
    in.states.push_back(beam.state);
    in.tokens.push_back(beam.tokens.empty() ? decoder.start_token : beam.tokens.back());
    in.log_probs.push_back(beam.log_prob);
  }
  BeamStep step;
  if (decoder.step_beams) {
    step = decoder.step_beams(ctx, in.states, in.tokens);
    if (step.states.size() != beams.size())
      fail("beam", "step_beams returned ", step.states.size(), " states for ", beams.size(),
           " beams");
    return step;
  }
  for (std::size_t b = 0; b < beams.size(); ++b) {
    const DecoderStep one = decoder.step(ctx, in.states[b], in.tokens[b]);
    step.states.push_back(one.state);
    step.log_probs.push_back(one.log_probs);
  }
  return step;
}

// Picks the next beams from the ranked expansions into `next` (see beam_program).
void next_beams(RankedExpansions& ranked, const std::vector<Beam>& beams,
                std::span<const Val> states, const Decoder& decoder, const BeamOptions& options,
                std::vector<Hypothesis>& ended, std::vector<Beam>& next) {
  const std::size_t width = std::size_t(options.width);
  next.clear();
  for (std::size_t rank = 0; rank < ranked.size() && next.size() < width; ++rank) {
    const RankedExpansions::Expansion c = ranked[rank];
    Beam beam{states[c.beam], beams[c.beam].tokens, c.log_prob};
    beam.tokens.push_back(c.token);
    if (c.token != decoder.end_token)
      next.push_back(std::move(beam));
    else if (rank < width)
      ended.push_back(finished(beam, options.length_penalty, true));
  }
}

}  // namespace

double normalised_score(double log_prob, std::size_t length, double length_penalty) {
  if (length_penalty == 0.0 || length == 0) return log_prob;
  return log_prob / std::pow(double(length), length_penalty);
}

bool search_finished(std::span<const double> finished_scores, double best_live_log_prob,
                     std::size_t width, std::size_t max_length, double length_penalty) {
  if (width == 0 || finished_scores.size() < width) return false;
  std::vector<double> best(finished_scores.begin(), finished_scores.end());
  std::nth_element(best.begin(), best.begin() + std::ptrdiff_t(width - 1), best.end(),
                   std::greater<>());
  const double reachable = length_penalty > 0 && best_live_log_prob < 0
                               ? normalised_score(best_live_log_prob, max_length, length_penalty)
                               : best_live_log_prob;
  return reachable <= best[width - 1];
}

void RankedExpansions::clear() {
  all_.clear();
  sorted_ = 0;
  vocabulary_ = 0;
}

std::uint32_t RankedExpansions::add(std::uint32_t first, const Tensor& rows,
                                    std::span<const double> beam_log_probs, const char* where) {
  if (rows.dtype() != DType::kFloat32 || (rows.rank() != 1 && rows.rank() != 2) ||
      rows.numel() == 0)
    fail(where, "log_probs must be float32 [vocabulary] or [beams, vocabulary], got ",
         rows.describe());
  const std::int64_t vocabulary = rows.shape()[rows.rank() - 1];
  if (vocabulary_ != 0 && vocabulary != vocabulary_)
    fail(where, "log_probs over ", vocabulary, " tokens after ", vocabulary_, " in one step");
  vocabulary_ = vocabulary;
  const std::int64_t count = rows.rank() == 1 ? 1 : rows.shape()[0];
  const float* data = rows.data<float>();
  std::uint32_t beam = first;
  for (std::int64_t r = 0; r < count && beam < beam_log_probs.size(); ++r, ++beam)
    for (std::int64_t t = 0; t < vocabulary; ++t) {
      const double log_prob = beam_log_probs[beam] + double(data[r * vocabulary + t]);
      // NaN ranks last: the ranking needs a strict order.
      all_.push_back({std::isnan(log_prob) ? -std::numeric_limits<double>::infinity() : log_prob,
                      beam, std::int32_t(t)});
    }
  return beam;
}

const RankedExpansions::Expansion& RankedExpansions::operator[](std::size_t rank) {
  if (rank >= all_.size()) fail("beam", "expansion ", rank, " asked of ", all_.size());
  if (rank >= sorted_) {
    // A few more than asked: a search reads on past its width while expansions end.
    // Selected in linear time, then only those sorted (a heap over every expansion, as
    // partial_sort keeps, cost a beam search at batch 64 3% of its time in perf).
    const std::size_t upto = std::min(all_.size(), std::max<std::size_t>(2 * rank + 2, 8));
    const auto from = all_.begin() + std::ptrdiff_t(sorted_),
               to = all_.begin() + std::ptrdiff_t(upto);
    std::nth_element(from, to - 1, all_.end(), Better{});
    std::sort(from, to, Better{});
    sorted_ = upto;
  }
  return all_[rank];
}

Program greedy_program(Context& ctx, const Decoder& decoder, Val initial, Hypothesis& out) {
  check_decoder(decoder, "greedy");
  out = Hypothesis{};
  Val state = initial;
  std::int32_t token = decoder.start_token;
  for (std::int32_t length = 0; length < decoder.max_length && !out.ended; ++length) {
    const DecoderStep step = decoder.step(ctx, state, token);
    const auto [best, log_prob] = argmax_of(co_await ctx.read(step.log_probs), "greedy");
    token = best;
    out.tokens.push_back(token);
    out.log_prob += log_prob;
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
  std::vector<Beam> beams{Beam{initial, {}, 0.0}}, next;
  StepInputs inputs;
  RankedExpansions ranked;
  std::vector<double> scores;
  for (std::int32_t length = 1; length <= decoder.max_length && !beams.empty(); ++length) {
    // Every beam's step is issued before the first read: one engine step runs them all.
    const BeamStep step = issue_step(ctx, decoder, beams, inputs);
    ranked.clear();
    std::uint32_t read = 0;
    for (const Val rows : step.log_probs) {
      const Tensor value = co_await ctx.read(rows);
      read = ranked.add(read, value, inputs.log_probs, "beam");
    }
    if (read != beams.size())
      fail("beam", "the step's log_probs have rows for ", read, " of ", beams.size(), " beams");
    next_beams(ranked, beams, step.states, decoder, options, out, next);
    std::swap(beams, next);  // best first
    scores.clear();
    for (const Hypothesis& h : out) scores.push_back(h.score);
    if (!beams.empty() && search_finished(scores, beams[0].log_prob, std::size_t(options.width),
                                          std::size_t(decoder.max_length), options.length_penalty))
      break;
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
  run_each(
      engine, initial.size(),
      [&](Context& ctx, std::size_t e) { return greedy_program(ctx, decoder, initial[e], out[e]); },
      [&](std::size_t e) { out[e] = Hypothesis{}; });
  return out;
}

std::vector<std::vector<Hypothesis>> beam_search(Engine& engine, const Decoder& decoder,
                                                 std::span<const Val> initial,
                                                 BeamOptions options) {
  std::vector<std::vector<Hypothesis>> out(initial.size());
  run_each(
      engine, initial.size(),
      [&](Context& ctx, std::size_t e) {
        return beam_program(ctx, decoder, initial[e], options, out[e]);
      },
      [&](std::size_t e) { out[e].clear(); });
  return out;
}

}  // namespace weft::flow
