// `weft info`: what this build of Weft is and how it will run — version, the GEMM provider
// and the ones built in, thread count, and whether a CUDA device can be used.
#include <fmt/core.h>

#include <string>

#include "commands.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/tensor/tensor.h"

namespace weft::tool {

const char* version() { return WEFT_VERSION_STRING; }

int run_info(const InfoOptions&) {
  fmt::print("weft {}\n", version());
  fmt::print("gemm provider: {}\n", gemm_provider_name(gemm_provider()));
  std::string providers;
  for (GemmProvider provider : available_gemm_providers()) {
    if (!providers.empty()) providers += ", ";
    providers += gemm_provider_name(provider);
  }
  fmt::print("gemm providers built in: {}\n", providers);
  fmt::print("threads: {}\n", num_threads());
  fmt::print("cpu backend: {}\n", cpu_backend_summary());
  // A CUDA allocation is the honest test: it fails both without the CUDA backend and without
  // a usable device, and its error says which.
  try {
    Tensor probe = Tensor::zeros({1}, DType::kFloat32, Device::kCuda);
    fmt::print("cuda: available\n");
  } catch (const Error& e) {
    fmt::print("cuda: not available ({})\n", e.what());
  }
  return 0;
}

}  // namespace weft::tool
