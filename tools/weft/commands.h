// The weft tool's subcommands: each has an options struct, an add_* function that binds it to
// CLI11 as a subcommand, and a run function that returns the process exit code (main.cpp lists
// them in one table). Errors are thrown (weft::Error) and reported by main as one line.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model_flags.h"

namespace CLI {
class App;
}

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

struct InfoOptions {
  std::string calibrate;  // a model whose GEMM classes to measure now ("" : none)
  std::string data_dir;   // its data folder ("" : the model's default)
};

struct ModelsOptions {
  bool json = false;  // the registry's descriptions as JSON
};

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

struct BenchTreeOptions {
  std::string model = "tree-lstm";
  std::string tree_type = "random";
  int tree_size = 128;
  std::vector<std::int64_t> vector_sizes{1024};
  std::vector<int> batch_sizes{1, 32, 64, 128, 256, 1024};
  std::vector<std::string> modes{"unbatched", "manual", "dynamic", "full-dynamic"};
  bool train = false;  // --train: training, which is also the default
  bool infer = false;  // --infer: inference instead
  int threads = 1;
  int repeats = 3;
  std::uint64_t seed = 1;
  int max_unbatched_trees = 32;
  double ceiling_seconds = 0.05;
  std::uint32_t max_step_rows = 0;
  std::string weave_ahead = "on";  // on: the next batch woven while this one runs; off: in turn
  int weave_threads = 1;
  std::string device = "cpu";
  std::string format = "table";
  std::string out_file;                // empty: stdout
  std::string plot_file;               // empty: no SVG
  std::string export_dir;              // empty: no export (trees, weights and the cross-check loss)
  std::vector<std::string> from_json;  // saved --format json runs to re-render instead of running
  bool quiet = false;                  // no progress lines on stderr
  bool profile = false;                // the work profile by kind (--profile)
};

// Which registered model `weft train / eval / infer` uses, with the option values given on
// the command line (model_flags.h fills it in after parsing).
struct ModelChoice {
  std::string name;
  nlohmann::json options = nlohmann::json::object();
};

struct TrainOptions {
  ModelChoice model;
  // The Trainer's options (weft/train/trainer_options.h) as flags, bound on each model's
  // subcommand from the Trainer's schema by add_train.
  std::map<std::string, std::shared_ptr<OptionFlags>> trainer_flags;
  bool compare_unbatched = true;  // measure dynamic batching against one call per node
  int procs = 1;                  // > 1: start that many processes through mpirun
};

struct EvalOptions {
  ModelChoice model;
  std::vector<std::string> checkpoints;  // more than one: an ensemble (models/ensemble.h)
  std::vector<std::string> splits{"dev", "test"};
  std::int64_t batch_size = 256;
  int threads = 1;
};

struct InferOptions {
  ModelChoice model;
  std::vector<std::string> checkpoints;  // more than one: an ensemble (models/ensemble.h)
  std::string input = "-";               // a file of one example per line, or - for stdin
  std::int64_t batch_size = 256;
  int threads = 1;
  int batches_ahead = 1;  // batches woven ahead of the running one (models/streaming_inference.h)
  std::string key;        // a field of JSON-object lines copied into each prediction as "key"
};

struct ServeOptions {
  std::string model;  // positional: the model of --checkpoint
  std::string checkpoint;
  std::vector<std::string> models;  // name=checkpoint
  std::string host = "127.0.0.1";
  int port = 8080;
  double max_wait_ms = 2;
  std::int64_t max_batch = 64;
  std::int64_t max_queue = 4096;
  std::int64_t max_body_bytes = 4 << 20;
  std::int64_t max_instances = 1024;
  int max_depth = 512;
  int http_threads = 300;
  int threads = 1;
  double header_timeout_s = 10;
  double body_timeout_s = 30;
  double idle_timeout_s = 5;
  std::int64_t max_connections = 8192;
  std::int64_t max_requests_per_connection = 10000;
  std::vector<std::string> allow_reload_from;
  std::string auth_token_file;
  bool whole_batch_decoding = false;  // decoding models: no joining between steps
  std::int64_t max_live_sequences = 256;
  int max_beam = 8;
  int max_decode_steps = 0;
  double release_memory_idle_s = 10;
};

struct BenchServeOptions {
  std::string checkpoint;  // served in-process twice: batching on and --max-batch 1
  int port = 0;            // > 0: measure a running server on 127.0.0.1:port instead
  std::string model;       // the URL's model name (default: the checkpoint's)
  std::string input;       // one instance per line (default: the SST test trees)
  std::vector<int> concurrency{1, 4, 16, 64, 256};
  std::int64_t requests = 2000;  // per point
  double seconds = 10;           // per point, at most
  int rounds = 1;                // interleaved rounds
  double max_wait_ms = 2;
  std::int64_t max_batch = 64;
  int threads = 1;
  std::string format = "table";
  std::string out_file;
  std::string plot_file;
  bool decoding = false;   // a decoding load, iteration-level vs whole-batch
  int decode_width = 256;  // the countdown model's width (the load's default model)
  std::string device;      // where the in-process servers run their models (empty: as saved)
};

struct BenchDecodeOptions {
  std::vector<std::string> models;  // tree2seq, seq2tree (empty: both, or the checkpoint's)
  std::string checkpoint;           // empty: train a small checkpoint per model here
  std::int64_t batch = 64;          // examples per batch, and held-out examples measured
  int beam = 4;                     // the beam rows' width (greedy rows are always measured)
  int rounds = 3;                   // interleaved rounds
  int threads = 1;
  std::uint64_t seed = 1;               // data and weights of the checkpoints trained here
  std::int64_t train_examples = 20000;  // with 4 epochs: about 97% exact match (tree2seq)
  int train_epochs = 4;
  std::int64_t hidden = 0;       // 0: the model's default
  std::int64_t held_out = 0;     // dev and test expressions each (0: the checkpoint's; 1000 here)
  std::string keep_checkpoints;  // a folder for the checkpoints trained here (empty: removed)
  std::string format = "table";
  std::string out_file;
  bool quiet = false;
  bool profile = false;  // one profiled pass of the decoding arms after the rounds
  bool warm = false;     // each timed decode call after an untimed one of the same examples
};

// `weft serve`: the HTTP inference server (serve_command.cpp); `weft bench serve`: its load
// generator (bench_serve_command.cpp).
// --batch-invariant on every command that computes, once they are all added, and
// --no-batch-invariant on the serving ones, which default to the mode (batch_invariant_flags.cpp).
struct BatchInvariantFlags {
  bool on = false;   // --batch-invariant given
  bool off = false;  // --no-batch-invariant given
  std::vector<const CLI::App*> serving_commands;
};
void add_batch_invariant_flag(CLI::App& app, BatchInvariantFlags& flags);
// After parsing: the mode as the flags, WEFT_BATCH_INVARIANT or the command's default say.
void apply_batch_invariant_flag(const BatchInvariantFlags& flags);

CLI::App* add_serve(CLI::App& app, ServeOptions& options);
int run_serve(const ServeOptions& options);
CLI::App* add_bench_serve(CLI::App& bench, BenchServeOptions& options);
int run_bench_serve(const BenchServeOptions& options);

// `weft train <model>`: trains with the Trainer (progress, JSON-lines log, checkpoints, best
// dev model), then reports test figures, throughput and the speedup of dynamic batching. The
// add_* functions bind one subcommand per registered model into `models`.
CLI::App* add_train(CLI::App& app, TrainOptions& options, ModelFlags& models);
int run_train(const TrainOptions& options, int argc, char** argv);
// `weft eval <model> --checkpoint F`: one JSON object of metrics per split on stdout.
CLI::App* add_eval(CLI::App& app, EvalOptions& options, ModelFlags& models);
int run_eval(const EvalOptions& options);
// `weft infer <model> --checkpoint F`: one JSON line of predictions per input line.
CLI::App* add_infer(CLI::App& app, InferOptions& options, ModelFlags& models);
int run_infer(const InferOptions& options);

// Trains a small MLP on two interleaved spirals and reports loss, accuracy and speed.
CLI::App* add_demo(CLI::App& app, DemoOptions& options);
int run_demo(const DemoOptions& options);
// Prints the version and how this build runs: GEMM provider, threads, CUDA.
CLI::App* add_info(CLI::App& app, InfoOptions& options);
int run_info(const InfoOptions& options);
// Lists the registered models (or describes them as JSON).
CLI::App* add_models(CLI::App& app, ModelsOptions& options);
int run_models(const ModelsOptions& options);

// Weaves a few benchmark trees, runs them forward and backward, prints the schedule and
// the loom's statistics, and optionally writes the schedule as Graphviz DOT.
CLI::App* add_loom(CLI::App& app, LoomOptions& options);
int run_loom(const LoomOptions& options);

// `weft bench treelstm`: the ICLR 2017 timing benchmark (rows as table, CSV or JSON; an SVG
// plot; optionally the trees and weights for the PyTorch side-by-side script). Its options
// are bound in bench_command.cpp, next to the CSV schema its --help prints.
CLI::App* add_bench_treelstm(CLI::App& bench, BenchTreeOptions& options);
int run_bench_treelstm(const BenchTreeOptions& options);

// `weft bench decode`: decoding and training rates of tree2seq and seq2tree, batched against
// one at a time and against matched one-length batches (bench_decode_command.cpp).
CLI::App* add_bench_decode(CLI::App& bench, BenchDecodeOptions& options);
int run_bench_decode(const BenchDecodeOptions& options);

// The version of the weft library this tool runs with and the commit it was built from:
// "0.1.0 (commit 71aa130)" (weft/core/build_info.h).
std::string version();

}  // namespace weft::tool
