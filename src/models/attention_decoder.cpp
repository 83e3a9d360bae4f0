// The shared attention decoder (attention_decoder.h): its loom operations and padded memories.
#include "attention_decoder.h"

#include "weft/autodiff/ops.h"
#include "weft/core/error.h"

namespace weft::models {

AttentionDecoder::AttentionDecoder(nn::ParameterStore& store, loom::Loom& loom, std::int64_t hidden,
                                   std::int64_t inputs, std::int64_t outputs, bool parent_feed,
                                   std::int64_t joining_memory)
    : hidden_(hidden),
      outputs_(outputs),
      parent_feed_(parent_feed),
      joining_memory_(std::min(joining_memory, kMemorySizes.back())) {
  embed_ = std::make_unique<nn::Embedding>(store, "decoder/input", inputs, hidden);
  cell_ = std::make_unique<nn::LSTMCell>(store, "decoder/cell", parent_feed ? 2 * hidden : hidden,
                                         hidden);
  attended_ = std::make_unique<nn::FC>(store, "decoder/attended", 2 * hidden, hidden,
                                       nn::FCOptions{.activation = nn::Activation::kTanh});
  scores_ = std::make_unique<nn::FC>(store, "decoder/scores", hidden, outputs,
                                     nn::FCOptions{.activation = nn::Activation::kNone});
  const loom::TypeShape state{DType::kFloat32, {2 * hidden}, "state"};
  state_ = loom.add_type(state);
  id_ = loom.add_type(loom::TypeShape{DType::kInt32, {}, "id"});
  const loom::TypeShape length{DType::kInt32, {}, "memory_length"};
  length_ = loom.add_type(length);
  for (std::size_t k = 0; k < kMemorySizes.size(); ++k) {
    const std::int64_t m = kMemorySizes[k];
    const loom::TypeShape memory{DType::kFloat32, {m, hidden}, "memory" + std::to_string(m)};
    memory_types_[k] = loom.add_type(memory);
    for (std::size_t beams = 1; beams <= kMaxBeamRows; ++beams) {
      const std::string of = beams == 1 ? "" : "x" + std::to_string(beams);
      const loom::TypeShape ids =
          beams == 1 ? loom.type(id_)
                     : loom::TypeShape{DType::kInt32, {std::int64_t(beams)}, "ids" + of};
      const loom::TypeShape log_probs{
          DType::kFloat32, beams == 1 ? Shape{outputs} : Shape{std::int64_t(beams), outputs},
          "log_probs" + of};
      beam_ids_[beams] = loom.add_type(ids);
      std::vector<loom::TypeShape> in(beams, state), out(beams, state);
      in.push_back(ids);
      if (parent_feed) in.insert(in.end(), beams, state);
      in.push_back(memory);
      in.push_back(length);
      out.push_back(log_probs);
      const std::int64_t rows = std::int64_t(beams);
      step_ops_[beams][k] =
          loom.add_operation("decode" + std::to_string(m) + of, in, out,
                             [this, rows](std::span<const Var> x) { return body(x, rows); });
    }
  }
}

Var AttentionDecoder::hidden_half(Var states) const { return slice(states, 1, 0, hidden_); }

// Batched over n calls of `beams` beams each: the beams' states side by side become n * beams
// rows; each example's beams attend to its memory together ([beams, hidden] against [size,
// hidden]), so the memory is read once per example, not once per beam.
std::vector<Var> AttentionDecoder::body(std::span<const Var> in, std::int64_t beams) const {
  const std::size_t b = std::size_t(beams);
  const std::int64_t n = in[0].shape()[0], rows = n * beams, width = 2 * hidden_;
  const std::size_t memory_at = parent_feed_ ? 2 * b + 1 : b + 1;
  const Var memory = in[memory_at], lengths = in[memory_at + 1];
  const auto side_by_side = [&](std::size_t first) {
    return beams == 1 ? in[first] : reshape(concat(in.subspan(first, b)), {rows, width});
  };
  const Var state = side_by_side(0);
  Var x = (*embed_)(reshape(in[b], {rows}));
  if (parent_feed_) x = concat({x, hidden_half(side_by_side(b + 1))});
  const auto [h, c] = (*cell_)(x, hidden_half(state), slice(state, 1, hidden_, hidden_));
  // Dot-product attention over each example's own memory rows, never its padding.
  const Var context = reshape(
      ragged_attention(reshape(h, {n, beams, hidden_}), memory, lengths.value()), {rows, hidden_});
  const Var attended = (*attended_)(concat({h, context}));
  const Var log_probs = log_softmax((*scores_)(attended));
  if (beams == 1) return {concat({h, c}), log_probs};
  const Var next = reshape(concat({h, c}), {n, beams * width});
  std::vector<Var> out;
  for (std::int64_t j = 0; j < beams; ++j) out.push_back(slice(next, 1, j * width, width));
  out.push_back(reshape(log_probs, {n, beams, outputs_}));
  return out;
}

namespace {

// The index into kMemorySizes of the smallest memory holding `states` rows.
std::size_t memory_size_index(std::size_t states, const char* owner) {
  const auto& sizes = AttentionDecoder::kMemorySizes;
  std::size_t k = 0;
  while (k < sizes.size() && std::size_t(sizes[k]) < states) ++k;
  if (k == sizes.size())
    fail(owner, "an example has ", states, " states to attend to; at most ", sizes.back(), " fit");
  return k;
}

}  // namespace

std::vector<AttentionDecoder::Memory> AttentionDecoder::memories(
    flow::Engine& engine, Var states, const std::vector<std::vector<std::int64_t>>& rows,
    const char* owner, bool joining) const {
  // Every example padded to the batch's largest (with `joining`, at least joining_memory), in the
  // batch-invariant mode too: the attention sums over each example's own rows alone, so the
  // padding, and with it the companions, change none of its bits (one operation per step, not
  // one per memory size).
  const std::size_t floor = joining ? std::size_t(joining_memory_) : 1;
  std::size_t largest = 0;
  for (const std::vector<std::int64_t>& example : rows)
    largest = std::max(largest, memory_size_index(std::max(floor, example.size()), owner));
  if (rows.empty()) return {};
  return import_memories(engine, states, rows, largest);
}

std::vector<AttentionDecoder::Memory> AttentionDecoder::import_memories(
    flow::Engine& engine, Var states, const std::vector<std::vector<std::int64_t>>& rows,
    std::size_t k) const {
  const std::int64_t size = kMemorySizes[k], batch = std::int64_t(rows.size());
  const std::int64_t padding = states.shape()[0];  // the zero row appended below
  std::vector<std::int32_t> picks(std::size_t(batch * size), std::int32_t(padding));
  std::vector<std::int32_t> lengths(rows.size());
  for (std::size_t e = 0; e < rows.size(); ++e) {
    lengths[e] = std::int32_t(rows[e].size());
    for (std::size_t j = 0; j < rows[e].size(); ++j)
      picks[e * std::size_t(size) + j] = std::int32_t(rows[e][j]);
  }
  Tape& tape = Tape::current();
  const Device device = states.value().device();
  const Var padded =
      concat({states, tape.constant(Tensor::zeros({1, hidden_}, DType::kFloat32, device))}, 0);
  const Var memory =
      reshape(gather_rows(padded, Tensor::from_vector({batch * size}, picks, device)),
              {batch, size, hidden_});
  const std::vector<flow::Val> memory_vals = engine.import(memory, memory_types_[k]);
  const std::vector<flow::Val> length_vals =
      engine.import(tape.constant(Tensor::from_vector({batch}, lengths, device)), length_);
  std::vector<Memory> out(rows.size());
  for (std::size_t e = 0; e < rows.size(); ++e) out[e] = {memory_vals[e], length_vals[e], k};
  return out;
}

std::span<const flow::Val> AttentionDecoder::call_step(flow::Context& ctx, const Memory& memory,
                                                       std::span<const flow::Val> states,
                                                       std::span<const std::int32_t> inputs,
                                                       std::span<const flow::Val> parents) const {
  const std::size_t beams = states.size();
  std::array<flow::Val, 2 * kMaxBeamRows + 3> args;
  std::size_t count = 0;
  for (std::size_t b = 0; b < beams; ++b) args[count++] = states[b];
  args[count++] = ctx.constant(beam_ids_[beams], inputs);
  if (parent_feed_)
    for (std::size_t b = 0; b < beams; ++b) args[count++] = parents[b];
  args[count++] = memory.states;
  args[count++] = memory.length;
  return ctx.call(step_ops_[beams][memory.size_index], std::span(args.data(), count));
}

// One beam's step without step_beams' vectors: a greedy decoder issues one per live row-step.
flow::DecoderStep AttentionDecoder::step(flow::Context& ctx, const Memory& memory, flow::Val state,
                                         std::int32_t input, flow::Val parent) const {
  const std::span<const flow::Val> outs = call_step(
      ctx, memory, std::span(&state, 1), std::span(&input, 1),
      parent_feed_ ? std::span<const flow::Val>(&parent, 1) : std::span<const flow::Val>());
  return flow::DecoderStep{outs[0], outs[1]};
}

flow::BeamStep AttentionDecoder::step_beams(flow::Context& ctx, const Memory& memory,
                                            std::span<const flow::Val> states,
                                            std::span<const std::int32_t> inputs,
                                            std::span<const flow::Val> parents) const {
  if (inputs.size() != states.size() || parents.size() != (parent_feed_ ? states.size() : 0))
    fail("decoder", states.size(), " states with ", inputs.size(), " inputs and ", parents.size(),
         " parents");
  flow::BeamStep out;
  for (std::size_t first = 0; first < states.size(); first += kMaxBeamRows) {
    const std::size_t beams = std::min(kMaxBeamRows, states.size() - first);
    const std::span<const flow::Val> outs =
        call_step(ctx, memory, states.subspan(first, beams), inputs.subspan(first, beams),
                  parent_feed_ ? parents.subspan(first, beams) : parents);
    out.states.insert(out.states.end(), outs.begin(), outs.begin() + std::ptrdiff_t(beams));
    out.log_probs.push_back(outs[beams]);
  }
  return out;
}

}  // namespace weft::models
