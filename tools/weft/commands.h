// The weft tool's subcommands: each has an options struct that main.cpp binds to CLI11 and a
// run function that returns the process exit code. Errors are thrown (weft::Error) and
// reported by main as one line.
#pragma once

#include <cstdint>

namespace weft::tool {

struct DemoOptions {
  int epochs = 50;
  std::uint64_t seed = 1;
  int threads = 0;  // 0: keep the backend's default (WEFT_NUM_THREADS or the library's)
  int batch_size = 32;
  int hidden = 32;
  float learning_rate = 0.1f;
  int examples = 2000;  // training examples; a quarter as many more are held out
};

struct InfoOptions {};

// Trains a small MLP on two interleaved spirals and reports loss, accuracy and speed.
int run_demo(const DemoOptions& options);
// Prints the version and how this build runs: GEMM provider, threads, CUDA.
int run_info(const InfoOptions& options);

// The version of the weft library this tool was built with.
const char* version();

}  // namespace weft::tool
