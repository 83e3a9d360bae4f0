// What a request asks of a decoding model (models/decoding.h), and the pieces a model built on
// flow::Decoder (flow/search.h) shares: its search as one program (greedy or beam) and its
// answer as JSON. `weft serve` decodes such models at iteration level (requests join and leave
// the running batch between steps) through DecodingModel's jobs.
#pragma once

#include <cstdint>
#include <span>
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

// The common JSON of a decoding: {"tokens", "log_prob", "score", "ended"} of the best, and
// "beams" (every kept hypothesis) for beam search (settings.beam >= 1); a hypothesis that did not
// end says so in "stopped" ("the step bound of N was reached before the end token").
nlohmann::json hypotheses_json(std::span<const flow::Hypothesis> kept,
                               const DecodeSettings& settings, std::int32_t bound);

}  // namespace weft::models
WEFT_API_END
