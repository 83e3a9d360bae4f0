// The shared attention decoder (attention_decoder.h): its loom operations and padded memories.
#include "attention_decoder.h"

#include "weft/autodiff/ops.h"
#include "weft/core/error.h"

namespace weft::models {

AttentionDecoder::AttentionDecoder(nn::ParameterStore& store, loom::Loom& loom, std::int64_t hidden,
                                   std::int64_t inputs, std::int64_t outputs, bool parent_feed)
    : hidden_(hidden), parent_feed_(parent_feed) {
  embed_ = std::make_unique<nn::Embedding>(store, "decoder/input", inputs, hidden);
  cell_ = std::make_unique<nn::LSTMCell>(store, "decoder/cell", parent_feed ? 2 * hidden : hidden,
                                         hidden);
  attended_ = std::make_unique<nn::FC>(store, "decoder/attended", 2 * hidden, hidden,
                                       nn::FCOptions{.activation = nn::Activation::kTanh});
  scores_ = std::make_unique<nn::FC>(store, "decoder/scores", hidden, outputs,
                                     nn::FCOptions{.activation = nn::Activation::kNone});
  const loom::TypeShape state{DType::kFloat32, {2 * hidden}, "state"};
  const loom::TypeShape id{DType::kInt32, {}, "id"};
  const loom::TypeShape log_probs{DType::kFloat32, {outputs}, "log_probs"};
  state_ = loom.add_type(state);
  id_ = loom.add_type(id);
  for (std::size_t k = 0; k < kMemorySizes.size(); ++k) {
    const std::int64_t m = kMemorySizes[k];
    const loom::TypeShape memory{DType::kFloat32, {m, hidden}, "memory" + std::to_string(m)};
    const loom::TypeShape mask{DType::kFloat32, {m}, "mask" + std::to_string(m)};
    memory_types_[k] = loom.add_type(memory);
    mask_types_[k] = loom.add_type(mask);
    std::vector<loom::TypeShape> in{state, id};
    if (parent_feed) in.push_back(state);
    in.push_back(memory);
    in.push_back(mask);
    step_ops_[k] = loom.add_operation("decode" + std::to_string(m), in, {state, log_probs},
                                      [this](std::span<const Var> x) { return body(x); });
  }
}

Var AttentionDecoder::hidden_half(Var states) const { return slice(states, 1, 0, hidden_); }

// (state, id[, parent], memory, mask) -> (state', log_probs), batched over rows.
std::vector<Var> AttentionDecoder::body(std::span<const Var> in) const {
  const std::size_t memory_at = parent_feed_ ? 3 : 2;
  const Var state = in[0], memory = in[memory_at], mask = in[memory_at + 1];
  Var x = (*embed_)(in[1]);
  if (parent_feed_) x = concat({x, hidden_half(in[2])});
  const auto [h, c] = (*cell_)(x, hidden_half(state), slice(state, 1, hidden_, hidden_));
  const std::int64_t rows = h.shape()[0], size = memory.shape()[1];
  // Dot-product attention over the memory's rows; padding has -1e9 in the mask.
  const Var scores = reshape(batch_matmul(memory, reshape(h, {rows, hidden_, 1})), {rows, size});
  const Var weights = reshape(softmax(scores + mask), {rows, 1, size});
  const Var context = reshape(batch_matmul(weights, memory), {rows, hidden_});
  const Var attended = (*attended_)(concat({h, context}));
  return {concat({h, c}), log_softmax((*scores_)(attended))};
}

std::vector<AttentionDecoder::Memory> AttentionDecoder::memories(
    flow::Engine& engine, Var states, const std::vector<std::vector<std::int64_t>>& rows,
    const char* owner) const {
  std::size_t largest = 1;
  for (const auto& r : rows) largest = std::max(largest, r.size());
  std::size_t k = 0;
  while (k < kMemorySizes.size() && std::size_t(kMemorySizes[k]) < largest) ++k;
  if (k == kMemorySizes.size())
    fail(owner, "an example has ", largest, " states to attend to; at most ", kMemorySizes.back(),
         " fit");
  const std::int64_t size = kMemorySizes[k], batch = std::int64_t(rows.size());
  const std::int64_t padding = states.shape()[0];  // the zero row appended below
  std::vector<std::int32_t> picks(std::size_t(batch * size), std::int32_t(padding));
  std::vector<float> mask(std::size_t(batch * size), -1e9f);
  for (std::size_t e = 0; e < rows.size(); ++e)
    for (std::size_t j = 0; j < rows[e].size(); ++j) {
      picks[e * std::size_t(size) + j] = std::int32_t(rows[e][j]);
      mask[e * std::size_t(size) + j] = 0.f;
    }
  Tape& tape = Tape::current();
  const Device device = states.value().device();
  const Var padded =
      concat({states, tape.constant(Tensor::zeros({1, hidden_}, DType::kFloat32, device))}, 0);
  const Var memory =
      reshape(gather_rows(padded, Tensor::from_vector({batch * size}, picks, device)),
              {batch, size, hidden_});
  const std::vector<flow::Val> memory_vals = engine.import(memory, memory_types_[k]);
  const std::vector<flow::Val> mask_vals = engine.import(
      tape.constant(Tensor::from_vector({batch, size}, mask, device)), mask_types_[k]);
  std::vector<Memory> out;
  for (std::size_t e = 0; e < rows.size(); ++e) out.push_back({memory_vals[e], mask_vals[e], k});
  return out;
}

flow::DecoderStep AttentionDecoder::step(flow::Context& ctx, const Memory& memory, flow::Val state,
                                         std::int32_t input, flow::Val parent) const {
  const flow::Val id = ctx.constant(id_, std::span<const std::int32_t>(&input, 1));
  std::span<const flow::Val> outs;
  if (parent_feed_)
    outs = ctx.call(step_ops_[memory.size_index], {state, id, parent, memory.states, memory.mask});
  else
    outs = ctx.call(step_ops_[memory.size_index], {state, id, memory.states, memory.mask});
  return flow::DecoderStep{outs[0], outs[1]};
}

}  // namespace weft::models
