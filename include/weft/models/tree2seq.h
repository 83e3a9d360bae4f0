// tree2seq: reads a calculator expression tree with a Tree-LSTM (one static weave per batch)
// and writes the expression as infix text, a token at a time until its end token, attending
// to the tree's nodes (their states plus an embedding of their place in the text's order of
// nodes, since equal digits have equal states): a decoder whose length the model decides (flow
// programs; greedy or beam search). Trained by teacher forcing on text generated from a seed.
// A prediction is {"text": "((3 + 4) * 2)", "length": tokens written (the end token included),
// "log_prob", "score" (length-normalised), "ended": chose the end token, and "stopped" when it
// did not}, and with a beam "beams": every kept hypothesis so, best first (the prediction is the
// first): the schema of every decoding model (models/iterative_decoding.h).
#pragma once

#include <memory>

#include "weft/core/export.h"
#include "weft/models/flow_model.h"

WEFT_API_BEGIN
namespace weft::models {

class Tree2SeqModel : public FlowModel {
 public:
  explicit Tree2SeqModel(const OptionValues& options, const ModelInit& init = {});
  ~Tree2SeqModel() override;

  // An expression as the calculator reads it ({"number": 7} / {"op", "left", "right"}),
  // optionally wrapped as {"expression": ...}.
  nlohmann::json parse_example(std::string_view line, std::string_view where) const override;
  // 2n tokens for a tree of n nodes, of at most the largest attention memory.
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
