// seq2tree (Dong & Lapata 2016): reads a calculator expression as infix text with an LSTM (one
// static weave per batch) and grows its tree top-down. Every node's decision (a digit, or an
// operator whose two children become pending) is chosen from the model's own outputs, so the
// tree's shape is known only while decoding: a flow program per example keeps a stack of the
// pending children, each step fed its parent's state and attending to the text. Trained by
// teacher forcing on the gold tree; predicts greedily or by beam search over the decisions in
// top-down order. A prediction is {"expression": the tree as the calculator writes it (a child
// left undecided null), "text" (an undecided child "?"), "ended": every pending child decided
// within the bound (as many decisions as the input has symbols), and "stopped" when not,
// "length": decisions taken, "log_prob", "score"}, and with a beam "beams": every kept tree so,
// best first: the schema of every decoding model (models/iterative_decoding.h).
#pragma once

#include <memory>

#include "weft/core/export.h"
#include "weft/models/flow_model.h"

WEFT_API_BEGIN
namespace weft::models {

class Seq2TreeModel : public FlowModel {
 public:
  explicit Seq2TreeModel(const OptionValues& options, const ModelInit& init = {});
  ~Seq2TreeModel() override;

  // Infix text ("((3 + 4) * 2)", or "3 + 4 * 2" with the usual precedence), as the line
  // itself, a JSON string or {"text": ...}. A malformed text fails naming its column.
  nlohmann::json parse_example(std::string_view line, std::string_view where) const override;
  // A decision per symbol of the text, of at most the largest attention memory.
  std::int32_t max_decode_steps() const override;

 private:
  std::vector<std::unique_ptr<Encoding>> encode_batch(flow::Engine& engine,
                                                      std::span<const nlohmann::json> examples,
                                                      bool joining) override;
  flow::Program teacher_program(flow::Context& ctx, const Encoding& encoding,
                                const nlohmann::json& example, Targets& out) override;
  std::unique_ptr<DecodeJob> decode_job(std::unique_ptr<Encoding> encoding,
                                        const DecodeSettings& settings) override;
  bool exact_match(const nlohmann::json& answer, const nlohmann::json& example) const override;

  struct Layers;
  std::unique_ptr<Layers> layers_;
};

}  // namespace weft::models
WEFT_API_END
