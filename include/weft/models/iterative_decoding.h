// What a request asks of a decoding model (models/decoding.h), and the pieces a model built on
// flow::Decoder (flow/search.h) shares: its search as one program (greedy or beam) and its
// answer as JSON. `weft serve` decodes such models at iteration level (requests join and leave
// the running batch between steps) through DecodingModel's jobs.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/core/export.h"
#include "weft/flow/search.h"

WEFT_API_BEGIN
namespace weft::models {

// How one request wants its examples decoded.
struct DecodeSettings {
  // Every decoding model, the server's "beam", `weft infer --beam` and Python's beam=: 0 runs
  // greedy decoding's own program, k >= 1 beam search of width k (1 gives greedy's answers,
  // with "beams"). Negative widths are refused.
  int beam = 0;
  std::int32_t max_steps = 0;  // tokens at most (the end token included); 0: the model's bound
  // Beam search ranks finished hypotheses by log_prob / length^length_penalty (0: the plain
  // sum; flow::BeamOptions). Greedy decoding ignores it.
  double length_penalty = 0.0;
  // The examples join programs encoded at other times (a server admitting requests between
  // steps), so a model pads what varies with the example (tree2seq's and seq2tree's attention
  // memories) to the most its training data needs, and every step still batches into one
  // operation instead of one per size. Off: padded to the batch's largest (whole batches).
  bool joining = false;
};
// The largest length_penalty a model option or a server request may ask for (useful values
// lie in 0-2).
constexpr double kMaxLengthPenalty = 4.0;

// `decoder` bounded by `settings` (its max_steps, when given and below the decoder's own).
flow::Decoder bounded_decoder(flow::Decoder decoder, const DecodeSettings& settings);

// One example's search as a flow program: greedy for settings.beam 0, else beam search of that
// width ranked with settings.length_penalty (a weft::Error for a negative width). `decoder` and
// `kept` must outlive the program.
flow::Program decode_program(flow::Context& ctx, const flow::Decoder& decoder, flow::Val initial,
                             const DecodeSettings& settings, std::vector<flow::Hypothesis>& kept);

// Every decoding model answers in one schema (README "Serving"): the best hypothesis's
// "ended" (true: it finished on its own, choosing the end token or completing its tree),
// "length" (the steps it took: tokens with the end token, or decisions), "log_prob", "score"
// and the model's own output ("tokens", "text", "expression"); a hypothesis that did not end
// also has "stopped" saying which bound it reached. Beam search (settings.beam >= 1) adds
// "beams": every kept hypothesis so, best first (the answer is the first).

// Sets "ended", and "stopped" when the hypothesis reached `bound` steps first (`end`: what it
// did not reach, "the end token").
void mark_ending(nlohmann::json& hypothesis, bool ended, std::int32_t bound,
                 std::string_view end = "the end token");

// That JSON for token sequences: {"tokens", "length", "log_prob", "score", "ended"} and so on.
nlohmann::json hypotheses_json(std::span<const flow::Hypothesis> kept,
                               const DecodeSettings& settings, std::int32_t bound);

}  // namespace weft::models
WEFT_API_END
