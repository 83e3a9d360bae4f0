// `weft info`: what this build of Weft is and how it will run — version, the GEMM provider
// and the ones built in, thread count, and whether a CUDA device can be used.
#include <fmt/core.h>

#include <string>

#include "commands.h"
#include "weft/backend/cpu.h"
#include "weft/backend/cuda.h"

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
  if (!cuda_available()) {
    fmt::print("cuda: not available ({})\n", cuda_unavailable_reason());
    return 0;
  }
  fmt::print("cuda: available, {} device(s)\n", cuda_device_count());
  for (int device = 0; device < cuda_device_count(); ++device)
    fmt::print("cuda device {}: {}\n", device, cuda_device_name(device));
  return 0;
}

}  // namespace weft::tool
