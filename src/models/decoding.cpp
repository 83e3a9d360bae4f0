// The whole-batch driver of a decoding model (models/decoding.h): one tape and engine, every
// example's job admitted at once, stepped until all are done.
#include "weft/models/decoding.h"

#include "weft/core/error.h"
#include "weft/nn/mode.h"

namespace weft::models {

std::vector<nlohmann::json> DecodingModel::decode(std::span<const nlohmann::json> examples,
                                                  const DecodeSettings& settings,
                                                  std::vector<std::int64_t>* steps) {
  if (steps != nullptr) steps->clear();
  if (examples.empty()) return {};
  Tape tape;
  tape.set_grad_enabled(false);
  TapeScope scope(tape);
  nn::ForwardMode mode(false);
  flow::Engine engine(decoding_loom(), tape, {.drop_step_intermediates = true}, decoding_device());
  const std::vector<std::unique_ptr<DecodeJob>> jobs = encode(engine, examples, settings);
  if (jobs.size() != examples.size())
    fail("decode", "encode returned ", jobs.size(), " jobs for ", examples.size(), " examples");
  for (const auto& job : jobs)
    engine.admit([&j = *job](flow::Context& ctx) { return j.program(ctx); });
  if (steps == nullptr) {
    engine.run();
  } else {
    steps->assign(jobs.size(), 0);
    for (std::int64_t step = 1; engine.step(); ++step) {
      for (std::size_t e = 0; e < jobs.size(); ++e)
        if ((*steps)[e] == 0 && engine.state(e) == flow::ProgramState::kDone) (*steps)[e] = step;
    }
  }
  std::vector<nlohmann::json> answers;
  answers.reserve(jobs.size());
  for (std::size_t e = 0; e < jobs.size(); ++e) {
    if (engine.state(e) != flow::ProgramState::kDone) fail("decode", engine.error(e));
    answers.push_back(jobs[e]->answer());
  }
  return answers;
}

}  // namespace weft::models
