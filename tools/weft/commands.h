// The weft tool's subcommands: each has an options struct that main.cpp binds to CLI11 and a
// run function that returns the process exit code. Errors are thrown (weft::Error) and
// reported by main as one line.
#pragma once

#include <cstdint>
#include <string>

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

struct LoomOptions {
  int trees = 3;
  int leaves = 8;
  std::string tree_type = "random";
  std::string model = "tree-lstm";
  std::int64_t vector_size = 16;
  std::string strategy = "by_depth";
  std::uint64_t seed = 1;
  std::string dot_file;  // empty: no DOT output
};

// Trains a small MLP on two interleaved spirals and reports loss, accuracy and speed.
int run_demo(const DemoOptions& options);
// Prints the version and how this build runs: GEMM provider, threads, CUDA.
int run_info(const InfoOptions& options);

// Weaves a few benchmark trees, runs them forward and backward, prints the schedule and
// the loom's statistics, and optionally writes the schedule as Graphviz DOT.
int run_loom(const LoomOptions& options);

// The version of the weft library this tool was built with.
const char* version();

}  // namespace weft::tool
