// The weft command-line tool: parses arguments with CLI11 and dispatches to a subcommand
// (train_command.cpp, demo_command.cpp, info_command.cpp, models_command.cpp, loom_command.cpp,
// bench_command.cpp). Every failure ends as
// one line on stderr and a non-zero exit code, never a stack trace.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <exception>
#include <iostream>

#include "commands.h"
#include "weft/core/error.h"
#include "weft/dist/communicator.h"

namespace {

int run(int argc, char** argv) {
  using namespace weft::tool;
  CLI::App app{"weft: deep learning on dynamic computation graphs", "weft"};
  app.set_version_flag("--version", version());
  app.require_subcommand(1);

  DemoOptions demo;
  CLI::App* demo_cmd =
      app.add_subcommand("demo", "Train a small MLP on two interleaved spirals (the engine demo)");
  demo_cmd->add_option("--epochs", demo.epochs, "Passes over the training set")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  demo_cmd->add_option("--seed", demo.seed, "Seed of the data and the initial weights")
      ->capture_default_str();
  demo_cmd->add_option("--threads", demo.threads, "GEMM threads (0: the backend's default)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  demo_cmd->add_option("--batch-size", demo.batch_size, "Examples per SGD step")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  demo_cmd->add_option("--hidden", demo.hidden, "Hidden units")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  demo_cmd->add_option("--learning-rate", demo.learning_rate, "SGD step size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  demo_cmd->add_option("--examples", demo.examples, "Training examples")
      ->capture_default_str()
      ->check(CLI::Range(2, 10000000));

  InfoOptions info;
  CLI::App* info_cmd = app.add_subcommand("info", "Print the version and the backend in use");
  info_cmd->add_option("--calibrate", info.calibrate,
                       "Measure now every GEMM shape class MODEL's training and evaluation batches "
                       "use (at its recipe's batch size), ignoring the cache, and cache the clean "
                       "measurements: run it on a quiet machine");
  info_cmd->add_option("--data-dir", info.data_dir, "The data folder for --calibrate");

  ModelsOptions models_options;
  CLI::App* models_cmd = app.add_subcommand("models", "List the registered models");
  models_cmd->add_flag("--json", models_options.json,
                       "Each model's summary, input form, options and recipe as JSON");

  LoomOptions loom;
  CLI::App* loom_cmd = app.add_subcommand(
      "loom", "Weave a few trees, run them batched, show the schedule and the loom's statistics");
  loom_cmd->add_option("--trees", loom.trees, "Trees in the batch")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  loom_cmd->add_option("--leaves", loom.leaves, "Leaves per tree")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  loom_cmd->add_option("--tree-type", loom.tree_type, "random, balanced or sequence")
      ->capture_default_str();
  loom_cmd->add_option("--model", loom.model, "tree-lstm or tree-fc")->capture_default_str();
  loom_cmd->add_option("--vector-size", loom.vector_size, "Hidden vector size")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  loom_cmd->add_option("--strategy", loom.strategy, "by_depth, sinks_last, agenda or none")
      ->capture_default_str();
  loom_cmd->add_option("--seed", loom.seed, "Seed of the trees and weights")->capture_default_str();
  loom_cmd->add_option("--dot", loom.dot_file, "Write the schedule as Graphviz DOT to this file");

  TrainOptions train;
  ModelFlags train_models, eval_models, infer_models;
  CLI::App* train_cmd = add_train(app, train, train_models);
  EvalOptions eval;
  CLI::App* eval_cmd = add_eval(app, eval, eval_models);
  InferOptions infer;
  CLI::App* infer_cmd = add_infer(app, infer, infer_models);

  CLI::App* bench_cmd = app.add_subcommand("bench", "Benchmarks");
  bench_cmd->require_subcommand(1);
  BenchTreeOptions bench;
  CLI::App* tree_bench_cmd = add_bench_treelstm(*bench_cmd, bench);
  ServeOptions serve;
  CLI::App* serve_cmd = add_serve(app, serve);
  BenchServeOptions bench_serve;
  CLI::App* bench_serve_cmd = add_bench_serve(*bench_cmd, bench_serve);

  check_model_name(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "weft: error: " << e.what() << " (see weft --help)\n";
    return 2;
  }

  if (*train_cmd) {
    train.model = {train_models.chosen(), train_models.given()};
    return run_train(train, argc, argv);
  }
  if (*eval_cmd) {
    eval.model = {eval_models.chosen(), eval_models.given()};
    return run_eval(eval);
  }
  if (*infer_cmd) {
    infer.model = {infer_models.chosen(), infer_models.given()};
    return run_infer(infer);
  }
  if (*demo_cmd) return run_demo(demo);
  if (*info_cmd) return run_info(info);
  if (*models_cmd) return run_models(models_options);
  if (*loom_cmd) return run_loom(loom);
  if (*tree_bench_cmd) return run_bench_treelstm(bench);
  if (*serve_cmd) return run_serve(serve);
  if (*bench_serve_cmd) return run_bench_serve(bench_serve);
  return 2;  // unreachable: require_subcommand(1)
}

}  // namespace

// Under mpirun an error names its rank and ends the whole job at once: the other ranks would
// otherwise wait in a collective for the one that stopped.
[[noreturn]] void fail_job(const std::string& message) {
  weft::dist::Communicator* world = nullptr;
  try {
    world = &weft::dist::world();
  } catch (const std::exception&) {
  }
  if (world == nullptr || world->size() == 1) {
    std::cerr << message << "\n";
    std::exit(1);
  }
  std::cerr << "[rank " << world->rank() << "] " << message << "\n";
  world->abort(1);
  std::exit(1);  // abort does not return; the compiler cannot see that through the interface
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const weft::Error& e) {
    fail_job(std::string("weft: error: ") + e.what());
  } catch (const std::exception& e) {
    fail_job(std::string("weft: unexpected error: ") + e.what());
  }
}
