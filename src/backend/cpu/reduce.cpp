// PLACEHOLDER: to be replaced by the real kernels.
#include "../kernels.h"
#include "weft/core/error.h"
namespace weft::backend::cpu {
void reduce_rows(ReduceOp op, const Tensor& x, Tensor& y, Tensor* argmax) { fail("reduce_rows", "not implemented"); }
void segment_reduce(ReduceOp op, const Tensor& x, const Tensor& segment_ids, Tensor& y,
                             Tensor* argmax) { fail("segment_reduce", "not implemented"); }
void scatter_by_argmax(const Tensor& dy, const Tensor& argmax, Tensor& dx) { fail("scatter_by_argmax", "not implemented"); }
void reduce_all(ReduceAllOp op, const Tensor& x, Tensor& y) { fail("reduce_all", "not implemented"); }
}
