// `weft info`: what this build of Weft is and how it will run — version, the GEMM providers
// built in and how products are assigned to them (forced, or calibrated per shape class, with
// what calibration measured and where it is cached), thread count, and whether a CUDA device
// can be used.
#include <fmt/core.h>

#include <string>

#include "commands.h"
#include "weft/backend/cpu.h"
#include "weft/backend/cuda.h"
#include "weft/backend/gemm_selection.h"

namespace weft::tool {

const char* version() { return WEFT_VERSION_STRING; }

namespace {

void print_gemm_selection() {
  const GemmSelectionReport report = gemm_selection_report();
  fmt::print("gemm selection: {}\n", report.mode);
  fmt::print("gemm cpu identity: {}\n", report.cpu_identity);
  fmt::print("gemm cache: {} ({})\n", report.cache_path.empty() ? "none" : report.cache_path,
             report.cache_status);
  if (report.classes.empty()) {
    fmt::print(
        "gemm classes: none measured yet at {} thread(s); each shape class is timed at "
        "its first product\n",
        num_threads());
    return;
  }
  fmt::print(
      "gemm classes at {} thread(s), GFLOP/s of each provider at the class's "
      "representative shape, timed by {}:\n",
      num_threads(), report.clock);
  const auto providers = available_gemm_providers();
  for (const GemmClassChoice& choice : report.classes) {
    const GemmShape shape = gemm_class_representative(choice.shape_class);
    std::string rates;
    for (std::size_t p = 0; p < providers.size(); ++p)
      rates += fmt::format("{}{} {:.1f}", p == 0 ? "" : ", ", gemm_provider_name(providers[p]),
                           choice.gflops[p]);
    std::string copy;
    if (choice.untransposed_copy)
      copy = *choice.untransposed_copy ? "; a weight as b: its transposed copy, NN faster"
                                       : "; a weight as b: read transposed, NN not faster";
    fmt::print("  {:<34} {:<8} ({}; measured at {}x{}x{}{}{})\n",
               gemm_class_label(choice.shape_class), gemm_provider_name(choice.provider), rates,
               shape.m, shape.n, shape.k, choice.from_cache ? ", cached" : "", copy);
  }
}

}  // namespace

int run_info(const InfoOptions&) {
  fmt::print("weft {}\n", version());
  std::string providers;
  for (GemmProvider provider : available_gemm_providers()) {
    if (!providers.empty()) providers += ", ";
    providers += gemm_provider_name(provider);
  }
  fmt::print("gemm providers built in: {}\n", providers);
  print_gemm_selection();
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
