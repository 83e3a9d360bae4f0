// The CUDA side of the kernels that read the loom's argument rows where they lie
// (kernels.def: pack_panels .. gather_row_columns). Not built for CUDA
// yet: the executor reads rows by index only on the CPU and gathers them on a GPU, so these are
// unreachable there and say so if called.
#include "../kernels.h"
#include "weft/core/error.h"

namespace weft::backend::cuda {
namespace {
[[noreturn]] void cpu_only(const char* kernel) {
  fail(kernel,
       "reads rows where they lie on the CPU only; the CUDA backend gathers the loom's "
       "arguments instead (issue 42, item 6)");
}
}  // namespace

void pack_panels(const Tensor&, bool, Tensor&) { cpu_only("pack_panels"); }
void product_read_rows(const RowBlocks&, const Tensor&, Tensor&) { cpu_only("product_read_rows"); }
void product_transposed_read_rows(const RowBlocks&, const Tensor&, float, Tensor&) {
  cpu_only("product_transposed_read_rows");
}
void product_write_rows(const Tensor&, const Tensor&, const RowBlocks&) {
  cpu_only("product_write_rows");
}
void lstm_cell_state_activating_rows(Tensor&, const Tensor*, const RowBlocks&, const Tensor*,
                                     Tensor&) {
  cpu_only("lstm_cell_state_activating_rows");
}
void lstm_cell_state_backward_activated_rows(const Tensor&, const RowBlocks&, const Tensor*,
                                             const Tensor&, Tensor*, bool, const RowBlocks*) {
  cpu_only("lstm_cell_state_backward_activated_rows");
}
void lstm_cell_state_rows(const Tensor&, const RowBlocks&, const Tensor*, Tensor&) {
  cpu_only("lstm_cell_state_rows");
}
void lstm_cell_state_backward_rows(const Tensor&, const RowBlocks&, const Tensor*, const Tensor&,
                                   Tensor*, bool, const RowBlocks*) {
  cpu_only("lstm_cell_state_backward_rows");
}
void batch_gemm_read_rows(const RowBlocks&, std::int64_t, bool, const RowBlocks&, std::int64_t,
                          bool, float, float, Tensor&) {
  cpu_only("batch_gemm_read_rows");
}
void gather_row_columns(const RowBlocks&, std::int64_t, Tensor&) { cpu_only("gather_row_columns"); }
// ragged_attention composes batch_matmul, a mask and softmax on a GPU (autodiff/ops_attention.cpp)
// instead of calling these: no CUDA kernel of its own yet.
void ragged_attention(const Tensor&, const RowBlocks&, const Tensor&, Tensor&, Tensor&) {
  cpu_only("ragged_attention");
}
void ragged_attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                               const Tensor&, Tensor*, bool, Tensor*, bool) {
  cpu_only("ragged_attention_backward");
}

}  // namespace weft::backend::cuda
