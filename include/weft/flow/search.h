// Greedy decoding and beam search as flow programs: one program per example, every beam's step
// issued before the first read, so one engine step batches all examples and all their beams.
// The model is reached only through Decoder::step, which issues the calls of one decoding step.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "weft/core/export.h"
#include "weft/flow/flow.h"

WEFT_API_BEGIN
namespace weft::flow {

struct DecoderStep {
  Val state;      // the decoder's state after the step
  Val log_probs;  // log-probabilities of the next token: float32 [vocabulary]
};

// One step of several beams of one example, issued together: each beam's next state, and the
// beams' log-probabilities as values whose rows are the beams in order (float32 [vocabulary]
// for one beam, [r, vocabulary] for r; rows past the last beam are padding, never read).
struct BeamStep {
  std::vector<Val> states;
  std::vector<Val> log_probs;
};

struct Decoder {
  // Issues one step from a state and the previous token (no reads: the search reads).
  std::function<DecoderStep(Context& ctx, Val state, std::int32_t token)> step;
  // Optional: issues one step for all of an example's live beams (states[b] fed tokens[b]) with
  // fewer calls than `step` once per beam, e.g. one operation over [beams, ...] rows, so the
  // beams share one read and their memory (attention) is not copied per beam. Must compute
  // what `step` computes for each beam.
  std::function<BeamStep(Context& ctx, std::span<const Val> states,
                         std::span<const std::int32_t> tokens)>
      step_beams;
  std::int32_t start_token = 0;  // fed at the first step
  std::int32_t end_token = 0;    // ends a hypothesis (and is its last token)
  std::int32_t max_length = 0;   // tokens generated at most, the end token included
};

struct Hypothesis {
  std::vector<std::int32_t> tokens;  // generated, without the start token
  double log_prob = 0;               // the sum of the chosen tokens' log-probabilities
  double score = 0;                  // log_prob, length-normalised (BeamOptions)
  bool ended = false;                // chose the end token (else stopped at max_length)
};

struct BeamOptions {
  int width = 4;
  // Hypotheses are ranked by log_prob / length^length_penalty (0: the plain sum, which
  // favours short outputs; about 0.6-1 evens that out).
  double length_penalty = 0.0;
};

double normalised_score(double log_prob, std::size_t length, double length_penalty);

// Whether a beam search may stop: it has kept at least `width` finished hypotheses (their
// normalised scores) and no live one can still score above the width-th best of them. A live
// hypothesis' log-probability only falls as it grows, and its length is at most max_length, so
// the best it can reach is normalised_score(best_live_log_prob, max_length, length_penalty).
// (Stopping as soon as `width` have finished would drop a likely hypothesis still being
// written in favour of unlikely short ones that ended early.)
bool search_finished(std::span<const double> finished_scores, double best_live_log_prob,
                     std::size_t width, std::size_t max_length, double length_penalty);

// One step's expansions of an example's beams (a beam's summed log-probability plus a token's),
// ranked best first with ties broken by beam then token (so width 1 is greedy decoding, which
// takes the lowest argmax). Searches over other structures than token sequences (seq2tree's
// trees) rank with it too. Only as much of the ranking as is asked for is sorted: a step costs
// O(beams * vocabulary) plus a sort of the few best, not a sort of every expansion.
class RankedExpansions {
 public:
  struct Expansion {
    double log_prob;
    std::uint32_t beam;
    std::int32_t token;
  };
  // Starts a step (the buffers are kept between steps).
  void clear();
  // Adds the expansions of beams first, first + 1, ... from `rows` (float32 [vocabulary] or
  // [r, vocabulary]: a value read from a BeamStep) for as many beams as `beam_log_probs` has
  // past `first` (padding rows are skipped). Returns the next beam's index. Fails, naming
  // `where`, on another shape or a vocabulary unlike the earlier rows'.
  std::uint32_t add(std::uint32_t first, const Tensor& rows, std::span<const double> beam_log_probs,
                    const char* where);
  std::size_t size() const { return all_.size(); }
  // The expansion of rank `rank` (< size()).
  const Expansion& operator[](std::size_t rank);

 private:
  std::vector<Expansion> all_;
  std::size_t sorted_ = 0;  // all_[0, sorted_) are the best, in order
  std::int64_t vocabulary_ = 0;
};

// One example's greedy decoding from `initial` into `out` (admit it to an engine).
Program greedy_program(Context& ctx, const Decoder& decoder, Val initial, Hypothesis& out);
// One example's beam search: at each step every live beam's expansions are ranked by their
// summed log-probability; the best `width` that do not end continue, those among the best
// `width` that end are kept, and the search stops when no live beam can still beat the
// width-th best kept one (search_finished), no beam is left or max_length is reached. `out`
// gets the kept hypotheses, best normalised score first (at most `width`). Width 1 without a
// length penalty is greedy decoding.
Program beam_program(Context& ctx, const Decoder& decoder, Val initial, BeamOptions options,
                     std::vector<Hypothesis>& out);

// Every example's search as one batch on `engine` (its programs are admitted and run). A
// program that fails (Decoder::step threw) leaves its example's result empty; engine.error()
// says why.
std::vector<Hypothesis> greedy_decode(Engine& engine, const Decoder& decoder,
                                      std::span<const Val> initial);
std::vector<std::vector<Hypothesis>> beam_search(Engine& engine, const Decoder& decoder,
                                                 std::span<const Val> initial, BeamOptions options);

}  // namespace weft::flow
WEFT_API_END
