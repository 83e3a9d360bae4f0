// Embedding: the id mapping (|id| mod num_buckets, or a range check naming the bad id) and
// the lookup on the table parameter; a non-trainable table records no gradient need.
#include "weft/nn/embedding.h"

#include <cstdlib>

#include "layer_util.h"
#include "weft/autodiff/ops.h"
#include "weft/core/error.h"

namespace weft::nn {

Embedding::Embedding(ParameterStore& store, const std::string& name, std::int64_t num_buckets,
                     std::int64_t dim, EmbeddingOptions options)
    : name_(store.scoped(name)),
      num_buckets_(num_buckets),
      dim_(dim),
      options_(std::move(options)) {
  const std::string where = detail::layer_where("Embedding", name_);
  detail::require_extent(where, "num_buckets", num_buckets);
  detail::require_extent(where, "dim", dim);
  if (num_buckets > std::int64_t(INT32_MAX))
    fail(where, "num_buckets ", num_buckets, " does not fit int32 ids");
  if (!options_.init) options_.init = uniform(-0.05f, 0.05f);
  auto scope = store.scope(name);
  table_ = store.create("table", {num_buckets, dim}, options_.init, options_.trainable);
  table_.set_sparse_grad(options_.sparse_gradient);
}

void Embedding::set_table(const Tensor& vectors) {
  const std::string where = detail::layer_where("Embedding", name_);
  if (!vectors.defined() || vectors.dtype() != DType::kFloat32 || vectors.shape() != table_.shape())
    fail(where, "vectors ", vectors.defined() ? vectors.describe() : "undefined",
         " do not fit the table float32 ", table_.shape().to_string());
  const Device device = table_.value().device();
  table_.value() = vectors.device() == device ? vectors.clone() : vectors.to(device);
}

Tensor Embedding::bucket_ids(const Tensor& ids) const {
  const std::string where = detail::layer_where("Embedding", name_);
  if (!ids.defined() || ids.dtype() != DType::kInt32 || ids.rank() != 1)
    fail(where, "ids must be int32 [B], got ", ids.defined() ? ids.describe() : "undefined");
  std::vector<std::int32_t> values = ids.to_int_vector();
  for (std::size_t k = 0; k < values.size(); ++k) {
    const std::int64_t id = values[k];
    if (options_.mod_inputs) {
      values[k] = std::int32_t(std::llabs(id) % num_buckets_);
    } else if (id < 0 || id >= num_buckets_) {
      fail(where, "id ", id, " at position ", k, " is outside [0, ", num_buckets_,
           "); enable mod_inputs to hash ids into the table");
    }
  }
  // The ids go where the table lives, so host ids look up a table on any device.
  if (!options_.mod_inputs) return ids.to(table_.value().device());
  return Tensor::from_vector(ids.shape(), values, table_.value().device());
}

Var Embedding::lookup(Tape& tape, const Tensor& ids) const {
  return embedding_lookup(tape.parameter(table_), bucket_ids(ids));
}

Var Embedding::operator()(const Tensor& ids) const { return lookup(Tape::current(), ids); }

Var Embedding::operator()(Var ids) const {
  if (!ids.defined())
    fail(detail::layer_where("Embedding", name_), "ids is an undefined Var, expected int32 [B]");
  return lookup(ids.tape(), ids.value());
}

}  // namespace weft::nn
