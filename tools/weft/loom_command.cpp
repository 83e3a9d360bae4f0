// `weft loom`: weaves a small batch of ICLR-benchmark trees, runs it forward and backward
// with a chosen scheduling strategy, and shows what the loom did: the schedule (text, and
// Graphviz DOT coloured by level with --dot) and the run's statistics.
#include <chrono>
#include <cstdio>
#include <fstream>

#include "commands.h"
#include "treelstm/iclr_benchmark.h"
#include "weft/autodiff/ops.h"
#include "weft/core/error.h"
#include "weft/loom/executor.h"

namespace weft::tool {

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
