// The weft command-line tool: binds every subcommand (each in its own *_command.cpp, declared
// in commands.h) to CLI11 through one table, parses the arguments and runs the one chosen.
// Every failure ends as one line on stderr and a non-zero exit code, never a stack trace.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

#include "commands.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/dist/communicator.h"

namespace {

using namespace weft::tool;

// One subcommand: the CLI11 node its options were bound to and how to run it once parsed. The
// options live in the closure, where CLI11 writes them while parsing.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

template <typename Options>
Command command(CLI::App& parent, CLI::App* (*add)(CLI::App&, Options&),
                int (*run)(const Options&)) {
  auto options = std::make_shared<Options>();
  CLI::App* app = add(parent, *options);
  return {app, [options, run] { return run(*options); }};
}

// train / eval / infer: the model subcommand chosen and the option values given under it
// become the options' ModelChoice before the run.
template <typename Options, typename Run>
Command model_command(CLI::App& parent, CLI::App* (*add)(CLI::App&, Options&, ModelFlags&),
                      Run run) {
  auto options = std::make_shared<Options>();
  auto models = std::make_shared<ModelFlags>();
  CLI::App* app = add(parent, *options, *models);
  return {app, [options, models, run] {
            options->model = {models->chosen(), models->given()};
            return run(*options);
          }};
}

// Every subcommand, in the order --help lists them.
std::vector<Command> commands(CLI::App& app, int argc, char** argv) {
  std::vector<Command> all;
  all.push_back(command(app, add_demo, run_demo));
  all.push_back(command(app, add_info, run_info));
  all.push_back(command(app, add_models, run_models));
  all.push_back(command(app, add_loom, run_loom));
  all.push_back(model_command(app, add_train, [argc, argv](const TrainOptions& options) {
    return run_train(options, argc, argv);
  }));
  all.push_back(model_command(app, add_eval, run_eval));
  all.push_back(model_command(app, add_infer, run_infer));
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  all.push_back(command(*bench, add_bench_treelstm, run_bench_treelstm));
  all.push_back(command(app, add_serve, run_serve));
  all.push_back(command(*bench, add_bench_serve, run_bench_serve));
  all.push_back(command(*bench, add_bench_decode, run_bench_decode));
  return all;
}

// The exit code when parsing ends the run (help, version, a usage error), else nothing.
std::optional<int> parse(CLI::App& app, int argc, char** argv) {
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
  return std::nullopt;
}

int run(int argc, char** argv) {
  CLI::App app{"weft: deep learning on dynamic computation graphs", "weft"};
  app.set_version_flag("--version", "weft " + version());
  app.require_subcommand(1);
  const std::vector<Command> all = commands(app, argc, argv);
  BatchInvariantFlags batch_invariant;
  add_batch_invariant_flag(app, batch_invariant);
  check_model_name(argc, argv);
  if (const std::optional<int> exit_code = parse(app, argc, argv)) return *exit_code;
  apply_batch_invariant_flag(batch_invariant);
  for (const Command& c : all) {
    if (*c.app) return c.run();
  }
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
