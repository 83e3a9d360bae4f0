// PLACEHOLDER: to be replaced by the real kernels.
#include "../kernels.h"
#include "weft/core/error.h"
namespace weft::backend::cpu {
void softmax(const Tensor& x, bool log, Tensor& y) { fail("softmax", "not implemented"); }
void softmax_backward(const Tensor& y, const Tensor& dy, bool log, Tensor& dx) { fail("softmax_backward", "not implemented"); }
void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor& losses,
                                    Tensor& probs) { fail("softmax_cross_entropy", "not implemented"); }
void softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                             const Tensor& dlosses, Tensor& dlogits) { fail("softmax_cross_entropy_backward", "not implemented"); }
}
