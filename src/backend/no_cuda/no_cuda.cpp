// The CUDA seam in a build without CUDA: every CUDA kernel (from kernels.def) and device
// allocation exists, and throws a clear error instead of failing to link.
#include <cstring>

#include "../device_memory.h"
#include "../kernels.h"
#include "weft/backend/cuda.h"
#include "weft/core/error.h"

namespace weft {

bool cuda_built() { return false; }
bool cuda_available() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_unavailable_reason() { return "this Weft was built without CUDA"; }
std::string cuda_device_name(int device) {
  fail("cuda", "device ", device, " does not exist: this Weft was built without CUDA");
}
void cuda_synchronize() {}

namespace backend {
namespace {
[[noreturn]] void no_cuda(const char* what) {
  fail(what,
       "this Weft was built without CUDA; reconfigure with -DWEFT_WITH_CUDA=ON on a "
       "machine with the CUDA toolkit, or keep tensors on Device::kCpu");
}
}  // namespace

namespace cuda {
#define WEFT_KERNEL(name, kind, params, args, device) \
  void name params { no_cuda(#name); }
#include "../kernels.def"
#undef WEFT_KERNEL
}  // namespace cuda

void* device_allocate(Device device, std::size_t bytes) { no_cuda("cuda allocate"); }
void device_free(Device device, void* pointer) { no_cuda("cuda free"); }

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                std::size_t bytes) {
  if (dst_device != Device::kCpu || src_device != Device::kCpu) no_cuda("copy");
  if (bytes) std::memcpy(dst, src, bytes);
}

}  // namespace backend
}  // namespace weft
