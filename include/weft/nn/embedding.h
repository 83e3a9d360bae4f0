// Embedding: a table of num_buckets learned vectors looked up by int32 id, as TF Fold's
// td.Embedding. Ids are taken |id| mod num_buckets (mod_inputs, the default) or must lie in
// [0, num_buckets). A non-trainable table (e.g. fixed GloVe vectors) gets no gradient; a
// trainable one may take its gradient as rows (EmbeddingOptions::sparse_gradient).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/autodiff/tape.h"
#include "weft/core/export.h"
#include "weft/nn/initializers.h"
#include "weft/nn/parameter_store.h"

WEFT_API_BEGIN
namespace weft::nn {

struct EmbeddingOptions {
  Initializer init{};  // empty: uniform(-0.05, 0.05); from_tensor(vectors) for pretrained ones
  bool trainable = true;
  bool mod_inputs = true;  // id -> |id| mod num_buckets; otherwise out-of-range ids throw
  // The table's gradient as the rows a batch looked up (Parameter::set_sparse_grad): a step
  // then costs what the batch touched, not the whole table, and the optimizers update those
  // rows lazily (weft/train/optimizer.h says how that differs from the dense update). Off, as
  // PyTorch's nn.Embedding(sparse=False): the dense gradient and dense update.
  bool sparse_gradient = false;
};

class Embedding {
 public:
  // Creates "name/table" [num_buckets, dim] in the store's current scope.
  Embedding(ParameterStore& store, const std::string& name, std::int64_t num_buckets,
            std::int64_t dim, EmbeddingOptions options = {});

  // ids int32 [B] -> [B, dim], on the current thread's tape (Tape::current()).
  Var operator()(const Tensor& ids) const;
  // The same, reading ids.value() (int32, not differentiable), on ids' tape.
  Var operator()(Var ids) const;
  // The ids actually looked up, on the table's device: |id| mod num_buckets, or the ids
  // themselves after the range check. Throws naming the bad id, its position and the range.
  Tensor bucket_ids(const Tensor& ids) const;

  // [num_buckets, dim]. For pretrained vectors assign table().value() (same shape, float32)
  // or call set_table(), which checks both. A tape that already used the table this
  // recording keeps the old values until tape.clear().
  const Parameter& table() const { return table_; }
  Parameter& table() { return table_; }
  // Copies `vectors` (float32 [num_buckets, dim], any device) into the table, on the table's
  // device; throws naming both shapes.
  void set_table(const Tensor& vectors);
  std::int64_t num_buckets() const { return num_buckets_; }
  std::int64_t dim() const { return dim_; }
  const std::string& name() const { return name_; }
  std::vector<Parameter> parameters() const { return {table_}; }

 private:
  Var lookup(Tape& tape, const Tensor& ids) const;

  std::string name_;
  std::int64_t num_buckets_, dim_;
  EmbeddingOptions options_;
  Parameter table_;
};

}  // namespace weft::nn
WEFT_API_END
