// `weft info`: what this build of Weft is and how it will run — version, the GEMM providers
// built in and how products are assigned to them (forced, or calibrated per shape class, with
// what calibration measured and where it is cached), thread count, and whether a CUDA device
// can be used.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "commands.h"
#include "weft/backend/cpu.h"
#include "weft/backend/cuda.h"
#include "weft/backend/gemm_selection.h"
#include "weft/core/build_info.h"
#include "weft/core/denormals.h"
#include "weft/core/rng.h"
#include "weft/models/registry.h"

namespace weft::tool {

std::string version() {
  return fmt::format("{} (commit {})", weft::version(), weft::build_commit());
}

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
    const std::string noise = choice.noise.empty() ? "" : "; NOT cached, noisy: " + choice.noise;
    fmt::print("  {:<34} {:<8} ({}; measured at {}x{}x{}{}{}{})\n",
               gemm_class_label(choice.shape_class), gemm_provider_name(choice.provider), rates,
               shape.m, shape.n, shape.k, choice.from_cache ? ", cached" : "", copy, noise);
  }
}

void print_float_modes() {
  if (denormal_mode() == DenormalMode::kFlush)
    fmt::print(
        "denormals: flushed to zero in Weft's CPU kernels (FTZ+DAZ; {}; WEFT_DENORMALS=keep "
        "keeps them){}\n",
        denormal_mode_source(),
        denormal_control_supported() ? "" : " -- no control on this CPU: nothing changes");
  else
    fmt::print("denormals: kept (set by {}; each thread's own mode is left alone)\n",
               denormal_mode_source());
  if (!openblas_workers_flush_denormals())
    fmt::print(
        "denormals on OpenBLAS's {} worker threads: not flushed (this OpenBLAS lacks "
        "CONSISTENT_FPCSR); calibrated products go to oneDNN\n",
        num_threads());
  const OpenBlasCore core = openblas_core();
  if (core.fallback)
    fmt::print(
        "openblas kernels: {} -- a FALLBACK: OpenBLAS did not recognise this CPU and runs "
        "kernels without AVX2; set {} before starting Weft (the calibration prefers oneDNN "
        "meanwhile)\n",
        core.name, core.remedy);
  else
    fmt::print("openblas kernels: {}\n", core.name);
}

// Runs one training batch and one evaluation batch of each split at the recipe's batch size
// (and the short batch the training split ends with), so that every GEMM class the model's
// products fall in is measured now.
void calibrate_model(const InfoOptions& options) {
  const models::ModelEntry& entry = models::find_model(options.calibrate);
  models::OptionValues values = entry.default_options();
  if (!options.data_dir.empty()) values.set_text("data_dir", options.data_dir, "--data-dir");
  const std::size_t batch_size =
      std::size_t(entry.training_options(values).values.integer("batch_size"));
  const std::unique_ptr<models::Model> model = models::create_model(values);
  remeasure_gemm_classes();
  Rng rng(1);
  for (const train::Split split : {train::Split::kTrain, train::Split::kDev}) {
    const std::size_t n = model->num_examples(split);
    std::vector<std::size_t> sizes = {std::min(batch_size, n)};
    if (split == train::Split::kTrain && n % batch_size != 0 && n > batch_size)
      sizes.push_back(n % batch_size);
    for (const std::size_t size : sizes) {
      if (size == 0) continue;
      std::vector<std::size_t> ids(size);
      std::iota(ids.begin(), ids.end(), std::size_t(0));
      const train::Batch batch{split, ids, nullptr};
      if (split == train::Split::kTrain)
        model->train_batch(batch, rng);
      else
        model->eval_batch(batch);
    }
  }
  fmt::print("calibrated the GEMM classes of {} (batch size {}):\n", options.calibrate, batch_size);
}

}  // namespace

CLI::App* add_info(CLI::App& app, InfoOptions& info) {
  CLI::App* cmd = app.add_subcommand("info", "Print the version and the backend in use");
  cmd->add_option("--calibrate", info.calibrate,
                  "Measure now every GEMM shape class MODEL's training and evaluation batches "
                  "use (at its recipe's batch size), ignoring the cache, and cache the clean "
                  "measurements: run it on a quiet machine");
  cmd->add_option("--data-dir", info.data_dir, "The data folder for --calibrate");
  return cmd;
}

int run_info(const InfoOptions& options) {
  if (!options.calibrate.empty()) calibrate_model(options);
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
  print_float_modes();
  if (!cuda_available()) {
    fmt::print("cuda: not available ({})\n", cuda_unavailable_reason());
    return 0;
  }
  fmt::print("cuda: available, {} device(s); its kernels keep denormals (nvcc without -ftz)\n",
             cuda_device_count());
  for (int device = 0; device < cuda_device_count(); ++device)
    fmt::print("cuda device {}: {}\n", device, cuda_device_name(device));
  return 0;
}

}  // namespace weft::tool
