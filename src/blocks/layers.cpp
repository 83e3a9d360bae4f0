// The nn layers and cells as Function blocks: the types come from the layers' sizes and the
// bodies call the layers on the batched arguments.
#include "weft/blocks/layers.h"

namespace weft::blocks {
namespace {

Type state_type(std::int64_t hidden) {
  return Type::tuple({Type::vector(hidden), Type::vector(hidden)});
}

std::vector<Type> tree_lstm_inputs(const nn::NaryTreeLSTMCell& cell) {
  std::vector<Type> inputs;
  if (cell.input_size() > 0) inputs.push_back(Type::vector(cell.input_size()));
  for (int k = 0; k < cell.arity(); ++k) inputs.push_back(state_type(cell.hidden()));
  return inputs;
}

}  // namespace

FCBlock::FCBlock(const nn::FC& layer)
    : Function(
          layer.name(), {Type::vector(layer.in_features())},
          [layer](std::span<const Var> x) { return std::vector<Var>{layer(x[0])}; },
          Type::vector(layer.out_features())) {}

FCBlock::FCBlock(nn::ParameterStore& store, const std::string& name, std::int64_t in,
                 std::int64_t out, nn::FCOptions options)
    : FCBlock(nn::FC(store, name, in, out, std::move(options))) {}

EmbeddingBlock::EmbeddingBlock(const nn::Embedding& layer)
    : Function(
          "embedding", {Type::scalar(DType::kInt32)},
          [layer](std::span<const Var> x) { return std::vector<Var>{layer(x[0])}; },
          Type::vector(layer.table().shape()[1])) {}

LSTMBlock::LSTMBlock(const nn::LSTMCell& cell)
    : Function(
          cell.name(), {Type::vector(cell.input_size()), state_type(cell.hidden())},
          [cell](std::span<const Var> in) {
            auto [h, c] = cell(in[0], in[1], in[2]);
            return std::vector<Var>{h, h, c};
          },
          Type::tuple({Type::vector(cell.hidden()), state_type(cell.hidden())})) {}

GRUBlock::GRUBlock(const nn::GRUCell& cell)
    : Function(
          cell.name(), {Type::vector(cell.input_size()), Type::vector(cell.hidden())},
          [cell](std::span<const Var> in) {
            Var h = cell(in[0], in[1]);
            return std::vector<Var>{h, h};
          },
          Type::tuple({Type::vector(cell.hidden()), Type::vector(cell.hidden())})) {}

TreeLSTMBlock::TreeLSTMBlock(const nn::NaryTreeLSTMCell& cell)
    : Function(
          cell.name(), tree_lstm_inputs(cell),
          [cell](std::span<const Var> in) {
            const std::size_t first = cell.input_size() > 0 ? 1 : 0;
            std::vector<Var> hs, cs;
            for (int k = 0; k < cell.arity(); ++k) {
              hs.push_back(in[first + 2 * std::size_t(k)]);
              cs.push_back(in[first + 2 * std::size_t(k) + 1]);
            }
            auto [h, c] = cell(first ? in[0] : Var(), hs, cs);
            return std::vector<Var>{h, c};
          },
          state_type(cell.hidden())) {}

ChildSumForgetBlock::ChildSumForgetBlock(const nn::ChildSumTreeLSTMCell& cell)
    : Function(
          cell.name() + "/forget", {Type::vector(cell.input_size()), state_type(cell.hidden())},
          [cell](std::span<const Var> in) {
            return std::vector<Var>{cell.forget_times_cell(in[0], in[1], in[2])};
          },
          Type::vector(cell.hidden())) {}

ChildSumNodeBlock::ChildSumNodeBlock(const nn::ChildSumTreeLSTMCell& cell)
    : Function(
          cell.name() + "/node",
          {Type::vector(cell.input_size()), Type::vector(cell.hidden()),
           Type::vector(cell.hidden())},
          [cell](std::span<const Var> in) {
            auto [h, c] = cell.node(in[0], in[1], in[2]);
            return std::vector<Var>{h, c};
          },
          state_type(cell.hidden())) {}

}  // namespace weft::blocks
