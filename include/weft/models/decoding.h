// Models that decode (DESIGN.md section 6): their output's length or shape is chosen while they
// run, so they predict with one flow program per example instead of one static weave. This is
// the whole of what a driver needs to run them: encode a batch onto an engine's tape (one static
// weave), admit each example's job, step the engine, and read each job's answer once its
// program is done. decode() is the whole-batch driver; a server can keep one long-lived engine
// and admit jobs between its steps (iteration-level batching). A model offers this through
// Model::decoding(), so front ends never cast.
//
//   Tape tape;  tape.set_grad_enabled(false);  TapeScope scope(tape);  nn::ForwardMode mode(false);
//   flow::Engine engine(model.decoding_loom(), tape, {}, model.decoding_device());
//   auto jobs = model.encode(engine, examples, model.decode_settings());
//   for (auto& job : jobs) engine.admit([&j = *job](flow::Context& ctx) { return j.program(ctx);
//   }); engine.run();   // or step() between admissions; the scope and mode must hold at every step
//   for (std::size_t e = 0; ...) answers.push_back(engine.state(e) == flow::ProgramState::kDone
//                                                      ? jobs[e]->answer() : error(e));
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/core/export.h"
#include "weft/flow/flow.h"
#include "weft/models/iterative_decoding.h"

WEFT_API_BEGIN
namespace weft::models {

// DecodeSettings (models/iterative_decoding.h): the beam width (1: greedy decoding; k > 1: beam
// search of width k) and a bound on steps. The models here also take beam 0: greedy decoding's
// own program, where beam 1 runs the beam search at width 1 (the same answers, and "beams").

// One example's decoding: its program and, once the program is done, its answer.
class DecodeJob {
 public:
  virtual ~DecodeJob() = default;
  // The example's program (greedy, or a beam search of the settings' width). Call it once, and
  // keep the job alive until the engine has finished or failed the program.
  virtual flow::Program program(flow::Context& ctx) = 0;
  // The prediction, as Model::predict gives it. Throws weft::Error before the program is done.
  virtual nlohmann::json answer() const = 0;
};

class DecodingModel {
 public:
  virtual ~DecodingModel() = default;

  // The loom and device every engine running this model's jobs is built with.
  virtual const loom::Loom& decoding_loom() const = 0;
  virtual Device decoding_device() const = 0;
  // The settings its options ask for (the runtime option "beam").
  virtual DecodeSettings decode_settings() const = 0;
  // The most steps any example's decoding can take (its longest output, the end token
  // included): a request for more (DecodeSettings::max_steps) is refused, not capped.
  virtual std::int32_t max_decode_steps() const = 0;
  // Encodes `examples` (parse_example's form) onto the engine's tape with one static weave and
  // returns one job per example, in order. Throws weft::Error naming the example ("example 3:
  // ...") when one is malformed. Call it, and step the engine, under a TapeScope of the
  // engine's tape (gradients off) and nn::ForwardMode(false).
  virtual std::vector<std::unique_ptr<DecodeJob>> encode(flow::Engine& engine,
                                                         std::span<const nlohmann::json> examples,
                                                         const DecodeSettings& settings) = 0;

  // A whole batch on a tape and engine of its own: the answers, in order. Throws weft::Error
  // with the engine's message (naming the example) when a program fails. With `steps`, also
  // each example's decoding length in engine steps: the step after which its program was done.
  // A program waits one step per read whatever else the batch holds, so this is the same in
  // any batch (greedy: one step per token or decision; beam: until its search stops), and a
  // batch runs as many steps as its longest example (what a benchmark's one-length batch needs).
  std::vector<nlohmann::json> decode(std::span<const nlohmann::json> examples,
                                     const DecodeSettings& settings,
                                     std::vector<std::int64_t>* steps = nullptr);
};

}  // namespace weft::models
WEFT_API_END
