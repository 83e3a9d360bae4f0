// Layers and cells of weft/nn as blocks: each adapter is a Function block (ONE loom operation)
// whose body calls the layer. Sharing is by instance: use the same block object at every node
// (inside a ForwardDeclaration recursion, a Map, a Fold) and every node runs the same cell, with
// the same parameters, batched into one call per depth. Parameter names come from the store's
// scopes (`auto s = store.scope("tree_lstm");` before creating the layer). Dropout inside
// layers follows nn::ForwardMode, which is thread-local: open it around Compiler::run.
#pragma once

#include "weft/blocks/blocks.h"
#include "weft/core/export.h"
#include "weft/nn/cells.h"
#include "weft/nn/embedding.h"
#include "weft/nn/fc.h"

WEFT_API_BEGIN
namespace weft::blocks {

// Tensor([in]) -> Tensor([out]): y = fc(x).
class FCBlock : public Function {
 public:
  explicit FCBlock(const nn::FC& layer);
  // Creates the layer in `store` (scoped name) and wraps it.
  FCBlock(nn::ParameterStore& store, const std::string& name, std::int64_t in, std::int64_t out,
          nn::FCOptions options = {});
};

// Tensor([], int32) -> Tensor([dim]): the embedding row of an id (mod num_buckets when the
// layer says so). Pretrained vectors and freezing are the layer's options.
class EmbeddingBlock : public Function {
 public:
  explicit EmbeddingBlock(const nn::Embedding& layer);
};

// Tuple(x [in], Tuple(h, c)) -> Tuple(h', Tuple(h', c')): an LSTM step shaped for RNN
// (output, state), state a Tuple (h, c) of [hidden].
class LSTMBlock : public Function {
 public:
  explicit LSTMBlock(const nn::LSTMCell& cell);
};

// Tuple(x [in], h) -> Tuple(h', h'): a GRU step shaped for RNN.
class GRUBlock : public Function {
 public:
  explicit GRUBlock(const nn::GRUCell& cell);
};

// The N-ary (binary when arity 2) Tree-LSTM of Tai et al. 2015:
// Tuple(x [in], (h_1, c_1), ..., (h_K, c_K)) -> Tuple(h, c); without x when the cell's
// input_size is 0: Tuple((h_1, c_1), ..., (h_K, c_K)) -> Tuple(h, c).
class TreeLSTMBlock : public Function {
 public:
  explicit TreeLSTMBlock(const nn::NaryTreeLSTMCell& cell);
};

// The Child-Sum Tree-LSTM in its two batched pieces (any number of children):
//   ChildSumForgetBlock: Tuple(x [in], (h_k, c_k)) -> f_k * c_k  [hidden], one row per child;
//   ChildSumNodeBlock:   Tuple(x [in], h_sum, fc_sum) -> Tuple(h, c).
// Wire them with Zip(Broadcast(x), children) >> Map(forget) >> Sum() and
// Map(GetItem(0)) >> Sum() (see the README's "Writing a model with blocks").
class ChildSumForgetBlock : public Function {
 public:
  explicit ChildSumForgetBlock(const nn::ChildSumTreeLSTMCell& cell);
};
class ChildSumNodeBlock : public Function {
 public:
  explicit ChildSumNodeBlock(const nn::ChildSumTreeLSTMCell& cell);
};

}  // namespace weft::blocks
WEFT_API_END
