// `weft loom`: weaves a small batch of ICLR-benchmark trees, runs it forward and backward
// with a chosen scheduling strategy, and shows what the loom did: the schedule (text, and
// Graphviz DOT coloured by level with --dot) and the run's statistics.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "commands.h"
#include "treelstm/iclr_benchmark.h"
#include "weft/autodiff/ops.h"
#include "weft/core/error.h"
#include "weft/loom/executor.h"

namespace weft::tool {

CLI::App* add_loom(CLI::App& app, LoomOptions& loom) {
  CLI::App* cmd = app.add_subcommand(
      "loom", "Weave a few trees, run them batched, show the schedule and the loom's statistics");
  cmd->add_option("--trees", loom.trees, "Trees in the batch")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("--leaves", loom.leaves, "Leaves per tree")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("--tree-type", loom.tree_type, "random, balanced or sequence")
      ->capture_default_str();
  cmd->add_option("--model", loom.model, "tree-lstm or tree-fc")->capture_default_str();
  cmd->add_option("--vector-size", loom.vector_size, "Hidden vector size")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--strategy", loom.strategy, "by_depth, sinks_last, agenda or none")
      ->capture_default_str();
  cmd->add_option("--seed", loom.seed, "Seed of the trees and weights")->capture_default_str();
  cmd->add_option("--dot", loom.dot_file, "Write the schedule as Graphviz DOT to this file");
  return cmd;
}

int run_loom(const LoomOptions& options) {
  Rng rng(options.seed);
  treelstm::IclrBenchmarkModel model(treelstm::parse_cell(options.model), options.vector_size,
                                     options.leaves, rng);
  const treelstm::TreeType tree_type = treelstm::parse_tree_type(options.tree_type);
  const auto start = std::chrono::steady_clock::now();
  loom::Weaver weaver(model.loom());
  for (int t = 0; t < options.trees; ++t)
    weaver.add_output(
        model.weave(weaver, treelstm::make_tree(tree_type, options.leaves, options.leaves, rng)));
  const double weave_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const loom::Strategy strategy = loom::parse_strategy(options.strategy);
  Tape tape;
  loom::Executor executor(model.loom(), tape);
  auto result = executor.run(weaver, strategy);
  const loom::Schedule& schedule = result.schedule();
  Var loss = l2_loss(result.outputs(model.hidden_type()));
  tape.backward(loss);
  std::printf("%s", loom::schedule_text(weaver, schedule).c_str());
  std::printf("weave %.6f s; %s", weave_seconds, result.stats().to_string().c_str());
  std::printf("loss %.6g\n", double(loss.value().item()));
  if (!options.dot_file.empty()) {
    std::ofstream dot(options.dot_file);
    if (!dot) fail("loom", "cannot write the DOT file '", options.dot_file, "'");
    dot << loom::schedule_dot(weaver, schedule);
    if (!dot.flush()) fail("loom", "writing the DOT file '", options.dot_file, "' failed");
    std::printf("wrote %s (render: dot -Tsvg %s -o schedule.svg)\n", options.dot_file.c_str(),
                options.dot_file.c_str());
  }
  return 0;
}

}  // namespace weft::tool
