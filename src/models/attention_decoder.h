// The decoder tree2seq and seq2tree share: an LSTM over an embedded input id (and, for seq2tree,
// its parent's state fed in beside it), Luong attention over the encoder's states padded to a
// memory of fixed size (each example attending over its own states alone: ragged_attention),
// and the log-probabilities of the next decision. One loom operation per
// memory size, so a batch's steps batch by operation like any weave; and for beam search one per
// memory size and number of beams (2 to kMaxBeamRows), stepping all of an example's beams in one
// call that attends to its memory once, instead of once per beam.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "weft/flow/search.h"
#include "weft/loom/loom.h"
#include "weft/nn/cells.h"
#include "weft/nn/embedding.h"
#include "weft/nn/fc.h"

namespace weft::models {

class AttentionDecoder {
 public:
  // Memory sizes: a batch's memory is padded to the smallest that holds its largest example.
  static constexpr std::array<std::int64_t, 6> kMemorySizes{4, 8, 16, 32, 64, 128};
  // The most beams one call of step_beams steps (more take several calls).
  static constexpr std::size_t kMaxBeamRows = 8;

  // `inputs` ids are embedded; `outputs` decisions are scored. With `parent_feed`, every step
  // also reads a parent state. `joining_memory`: the states a joining example's memory is
  // padded to at least (the most the model's training data has; memories()).
  AttentionDecoder(nn::ParameterStore& store, loom::Loom& loom, std::int64_t hidden,
                   std::int64_t inputs, std::int64_t outputs, bool parent_feed,
                   std::int64_t joining_memory);

  // The type of states ([h | c], float32 [2 hidden]) and of input ids (int32 scalars).
  loom::TypeId state_type() const { return state_; }
  loom::TypeId id_type() const { return id_; }
  std::int64_t hidden() const { return hidden_; }

  // One example's memory in an engine: its encoder states, padded, and how many of them are its
  // own (int32; the attention reads no further).
  struct Memory {
    flow::Val states, length;
    std::size_t size_index = 0;  // into kMemorySizes
  };
  // Memories for a batch: example e attends to the rows rows[e] of `states` ([n, hidden], on
  // the engine's tape), imported into the engine, padded to the batch's largest, or with
  // `joining` (DecodeSettings::joining) to at least joining_memory (the batch-invariant mode
  // alike: the attention never reads the padding). Fails (naming `owner`) when an example has
  // more rows than the largest memory.
  std::vector<Memory> memories(flow::Engine& engine, Var states,
                               const std::vector<std::vector<std::int64_t>>& rows,
                               const char* owner, bool joining) const;
  // Issues one step: from `state`, reading input id `input` (and `parent`'s state with
  // parent_feed), attending to `memory`. Nothing is read.
  flow::DecoderStep step(flow::Context& ctx, const Memory& memory, flow::Val state,
                         std::int32_t input, flow::Val parent = {}) const;
  // Issues one step of several beams of one example (states[b] reading inputs[b], and with
  // parent_feed parents[b]): what step() gives each, in one call per kMaxBeamRows beams whose
  // log-probabilities are one value [beams, outputs] (flow::BeamStep). Nothing is read.
  flow::BeamStep step_beams(flow::Context& ctx, const Memory& memory,
                            std::span<const flow::Val> states, std::span<const std::int32_t> inputs,
                            std::span<const flow::Val> parents = {}) const;
  // The h half of states [n, 2 hidden] -> [n, hidden].
  Var hidden_half(Var states) const;

 private:
  // The operation of `beams` rows per call: (beams states, ids[, beams parents], memory, length)
  // -> (beams states, log_probs); one beam takes scalar ids and gives [outputs] log_probs.
  std::vector<Var> body(std::span<const Var> in, std::int64_t beams) const;
  // One call of the operation for states.size() <= kMaxBeamRows beams of one example (sizes
  // checked by the callers): its outputs, valid until the next call on the engine.
  std::span<const flow::Val> call_step(flow::Context& ctx, const Memory& memory,
                                       std::span<const flow::Val> states,
                                       std::span<const std::int32_t> inputs,
                                       std::span<const flow::Val> parents) const;
  // memories() for every example of `rows`, padded to kMemorySizes[k].
  std::vector<Memory> import_memories(flow::Engine& engine, Var states,
                                      const std::vector<std::vector<std::int64_t>>& rows,
                                      std::size_t k) const;

  std::int64_t hidden_, outputs_;
  bool parent_feed_;
  std::int64_t joining_memory_;
  std::unique_ptr<nn::Embedding> embed_;
  std::unique_ptr<nn::LSTMCell> cell_;
  std::unique_ptr<nn::FC> attended_, scores_;
  loom::TypeId state_ = 0, id_ = 0;
  std::array<loom::TypeId, kMemorySizes.size()> memory_types_{};
  loom::TypeId length_ = 0;
  // [beams][memory size index]: beams 1 is step()'s operation.
  std::array<std::array<loom::OpId, kMemorySizes.size()>, kMaxBeamRows + 1> step_ops_{};
  std::array<loom::TypeId, kMaxBeamRows + 1> beam_ids_{};  // int32 [beams]
};

}  // namespace weft::models
