// PLACEHOLDER: to be replaced by the real kernels.
#include "../kernels.h"
#include "weft/core/error.h"
namespace weft::backend::cpu {
void gather_rows(const Tensor& x, const Tensor& indices, Tensor& y) { fail("gather_rows", "not implemented"); }
void scatter_add_rows(const Tensor& x, const Tensor& indices, Tensor& y) { fail("scatter_add_rows", "not implemented"); }
void find_bad_index(const Tensor& indices, std::int64_t limit, std::int64_t& first_bad) { fail("find_bad_index", "not implemented"); }
}
