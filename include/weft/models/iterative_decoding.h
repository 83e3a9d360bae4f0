// What a model that decodes as it goes (flow programs, flow/search.h) offers its front ends
// beyond Model: encoding a batch onto a flow engine, its decoder, and the answer as JSON. With
// it `weft serve` decodes at iteration level (requests join and leave the running batch between
// steps) and predict() is the same search run as one batch, so the two give equal answers.
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
  int beam = 1;                // 1: greedy decoding; k > 1: beam search of width k
  std::int32_t max_steps = 0;  // tokens at most (the end token included); 0: the model's bound
};

class IterativeDecoding {
 public:
  virtual ~IterativeDecoding() = default;

  // The loom whose operations the decoder calls (engines decoding this model run on it).
  virtual const loom::Loom& decoding_loom() const = 0;
  // Encodes parsed examples (parse_example's) as one batch on the current thread's tape, which
  // is `engine`'s, with gradients off: each example's initial decoder value, in order.
  virtual std::vector<flow::Val> encode(flow::Engine& engine,
                                        std::span<const nlohmann::json> examples) = 0;
  // The decoder; its max_length is the model's bound on decoding steps.
  virtual const flow::Decoder& decoder() const = 0;
  // The decoding of one example as predict() answers it: `kept` holds one hypothesis for
  // greedy decoding, or a beam search's, best first.
  virtual nlohmann::json decoded_json(const nlohmann::json& example,
                                      std::span<const flow::Hypothesis> kept,
                                      const DecodeSettings& settings) const = 0;
};

// The decoder of `model` bounded by `settings` (its max_steps, when given and below the model's).
flow::Decoder bounded_decoder(const IterativeDecoding& model, const DecodeSettings& settings);

// One example's search as a flow program: greedy for beam 1, else beam search. `decoder` and
// `kept` must outlive the program.
flow::Program decode_program(flow::Context& ctx, const flow::Decoder& decoder, flow::Val initial,
                             int beam, std::vector<flow::Hypothesis>& kept);

// Decodes `examples` as one batch on a fresh engine and tape (what predict() does): a failed
// example's JSON is {"error": why}.
std::vector<nlohmann::json> decode_batch(IterativeDecoding& model,
                                         std::span<const nlohmann::json> examples,
                                         const DecodeSettings& settings);

// The common JSON of a decoding: {"tokens", "log_prob", "score", "ended"} of the best, and
// "beams" (every kept hypothesis) for beam search; a hypothesis that did not end says so in
// "stopped" ("the step bound of N was reached before the end token").
nlohmann::json hypotheses_json(std::span<const flow::Hypothesis> kept,
                               const DecodeSettings& settings, std::int32_t bound);

}  // namespace weft::models
WEFT_API_END
