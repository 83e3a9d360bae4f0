// PLACEHOLDER: to be replaced by the real kernels.
#include "../kernels.h"
#include "weft/core/error.h"
namespace weft::backend::cpu {
void fill(Tensor& y, float value) { fail("fill", "not implemented"); }
void add_into(const Tensor& x, float scale, Tensor& y) { fail("add_into", "not implemented"); }
void unary(UnaryOp op, const Tensor& x, Tensor& y) { fail("unary", "not implemented"); }
void unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dy,
                             Tensor& dx) { fail("unary_backward", "not implemented"); }
void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y) { fail("binary", "not implemented"); }
void binary_backward(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& dy,
                              Tensor* da, Tensor* db) { fail("binary_backward", "not implemented"); }
}
