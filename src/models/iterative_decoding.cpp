// Decoders over flow::Decoder (models/iterative_decoding.h): one search program per example and
// the common JSON of a decoding.
#include "weft/models/iterative_decoding.h"

#include <fmt/format.h>

#include "weft/core/error.h"

namespace weft::models {

using nlohmann::json;

flow::Decoder bounded_decoder(flow::Decoder decoder, const DecodeSettings& settings) {
  if (settings.max_steps > 0 && settings.max_steps < decoder.max_length)
    decoder.max_length = settings.max_steps;
  return decoder;
}

flow::Program decode_program(flow::Context& ctx, const flow::Decoder& decoder, flow::Val initial,
                             const DecodeSettings& settings, std::vector<flow::Hypothesis>& kept) {
  const int beam = settings.beam;
  if (beam < 0) fail("decode", "the beam width must be 0 (greedy) or more, got ", beam);
  if (beam == 0) {
    kept.resize(1);
    return flow::greedy_program(ctx, decoder, initial, kept[0]);
  }
  return flow::beam_program(
      ctx, decoder, initial,
      flow::BeamOptions{.width = beam, .length_penalty = settings.length_penalty}, kept);
}

void mark_ending(json& hypothesis, bool ended, std::int32_t bound, std::string_view end) {
  hypothesis["ended"] = ended;
  if (!ended)
    hypothesis["stopped"] = fmt::format("the step bound of {} was reached before {}", bound, end);
}

json hypotheses_json(std::span<const flow::Hypothesis> kept, const DecodeSettings& settings,
                     std::int32_t bound) {
  const auto one = [&](const flow::Hypothesis& h) {
    json j = {{"tokens", h.tokens},
              {"length", h.tokens.size()},
              {"log_prob", h.log_prob},
              {"score", h.score}};
    mark_ending(j, h.ended, bound);
    return j;
  };
  if (kept.empty()) fail("decode", "the search kept no hypothesis");
  json out = one(kept[0]);
  if (settings.beam >= 1) {
    out["beams"] = json::array();
    for (const flow::Hypothesis& h : kept) out["beams"].push_back(one(h));
  }
  return out;
}

}  // namespace weft::models
