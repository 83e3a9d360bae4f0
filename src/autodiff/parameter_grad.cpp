// A parameter's gradient, dense or row-sparse. A table that asked for row-sparse gradients
// (Parameter::set_sparse_grad) collects the gathers' (indices, rows) pieces as they come; the
// optimizer and clipping read them coalesced (sorted distinct rows, duplicates summed), and
// anyone asking for the dense tensor gets the pieces scatter-added into it, in recording order,
// which is the sum the dense path would have made.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "../backend/kernels.h"
#include "weft/autodiff/tape.h"
#include "weft/core/error.h"

namespace weft {
namespace {

// Adds every piece into `dense` in order, as the gathers' backward would have.
void fold_into(std::vector<RowSparseGrad>& pieces, Tensor& dense) {
  for (const RowSparseGrad& piece : pieces) {
    if (piece.indices.numel() > 0) backend::scatter_add_rows(piece.rows, piece.indices, dense);
  }
  pieces.clear();
}

bool sorted_distinct(const std::vector<std::int32_t>& ids) {
  for (std::size_t i = 1; i < ids.size(); ++i)
    if (ids[i - 1] >= ids[i]) return false;
  return true;
}

}  // namespace

Tensor& Parameter::grad() {
  Data& d = *data_;
  if (!d.grad_rows.empty()) fold_into(d.grad_rows, d.grad);
  d.dense_grad_used = true;
  return d.grad;
}

const Tensor& Parameter::grad() const { return const_cast<Parameter*>(this)->grad(); }

void Parameter::zero_grad() {
  Data& d = *data_;
  d.grad_rows.clear();
  d.coalesced = false;
  if (!d.sparse_grad || d.dense_grad_used) backend::fill(d.grad, 0.0f);
  d.dense_grad_used = false;
}

void Parameter::set_sparse_grad(bool enabled) {
  Data& d = *data_;
  if (enabled && d.value.rank() == 0)
    fail("parameter", "'", d.name, "' is a scalar; row-sparse gradients need a leading row axis");
  if (!enabled && !d.grad_rows.empty()) fold_into(d.grad_rows, d.grad);
  if (!enabled) d.dense_grad_used = true;
  d.sparse_grad = enabled;
}

bool Parameter::grad_is_row_sparse() const { return data_->sparse_grad && !data_->dense_grad_used; }

void Parameter::add_grad_rows(const Tensor& indices, const Tensor& rows) {
  Data& d = *data_;
  WEFT_ASSERT(d.sparse_grad && indices.dtype() == DType::kInt32 && rows.dtype() == DType::kFloat32);
  WEFT_ASSERT(rows.rank() >= 1 && rows.rows() == indices.numel() &&
              rows.row_size() == d.value.row_size());
  if (indices.numel() == 0) return;
  if (d.dense_grad_used) {  // the dense tensor holds part of the gradient already: add there
    backend::scatter_add_rows(rows, indices, d.grad);
    return;
  }
  d.grad_rows.push_back(
      {indices.rank() == 1 ? indices : indices.reshaped(Shape{indices.numel()}), rows});
  d.coalesced = false;
}

RowSparseGrad& Parameter::row_sparse_grad() {
  Data& d = *data_;
  if (!grad_is_row_sparse())
    fail("parameter", "'", d.name,
         "' has no row-sparse gradient (it is dense, or set_sparse_grad was not called)");
  const Device device = d.value.device();
  if (d.grad_rows.empty()) {
    d.grad_rows.push_back({Tensor::empty(Shape{0}, DType::kInt32, device),
                           Tensor::empty(d.value.shape().with_rows(0), DType::kFloat32, device)});
    d.coalesced = true;
  }
  if (d.coalesced) return d.grad_rows.front();
  // The distinct rows, sorted, on the host: the indices are a batch's ids, small next to the
  // table, and the rows themselves stay on the device.
  std::vector<std::vector<std::int32_t>> ids;
  std::vector<std::int32_t> all;
  for (const RowSparseGrad& piece : d.grad_rows) {
    ids.push_back(piece.indices.to_int_vector());
    all.insert(all.end(), ids.back().begin(), ids.back().end());
  }
  if (d.grad_rows.size() == 1 && sorted_distinct(all)) {
    d.coalesced = true;
    return d.grad_rows.front();
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  const std::int64_t k = std::int64_t(all.size());
  RowSparseGrad out{Tensor::from_vector(Shape{k}, all, device),
                    Tensor::zeros(d.value.shape().with_rows(k), DType::kFloat32, device)};
  for (std::size_t p = 0; p < d.grad_rows.size(); ++p) {
    std::vector<std::int32_t> slots(ids[p].size());
    for (std::size_t i = 0; i < slots.size(); ++i)
      slots[i] = std::int32_t(std::lower_bound(all.begin(), all.end(), ids[p][i]) - all.begin());
    const Tensor slot_tensor =
        Tensor::from_vector(Shape{std::int64_t(slots.size())}, slots, device);
    backend::scatter_add_rows(d.grad_rows[p].rows, slot_tensor, out.rows);
  }
  d.grad_rows.assign(1, std::move(out));
  d.coalesced = true;
  return d.grad_rows.front();
}

}  // namespace weft
