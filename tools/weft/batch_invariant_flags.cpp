// --batch-invariant on the commands that compute (train, eval, infer, serve and each bench): the
// backend's batch-invariant mode (weft/backend/cpu.h) for the run. Off unless asked, by the flag
// or WEFT_BATCH_INVARIANT=1; `weft serve` too, since it measured more than 10% slower at 64
// connections and ~3x slower for lone requests (BENCHMARKS.md, "Batch invariance").
#include <CLI/CLI.hpp>

#include "commands.h"
#include "weft/backend/cpu.h"

namespace weft::tool {
namespace {

constexpr const char* kHelp =
    "Batch-invariant mode: each example's outputs are bit-identical whatever batch it is in "
    "(same machine and build; README, \"Batch invariance\")";

// The commands a flag goes on: those without subcommands under `command`, or itself.
void add_to_leaves(CLI::App& command, bool& on) {
  const std::vector<CLI::App*> subcommands = command.get_subcommands({});
  if (subcommands.empty()) {
    command.add_flag("--batch-invariant", on, kHelp);
    return;
  }
  for (CLI::App* sub : subcommands) add_to_leaves(*sub, on);
}

}  // namespace

void add_batch_invariant_flag(CLI::App& app, bool& on) {
  for (const char* name : {"train", "eval", "infer", "serve", "bench"})
    add_to_leaves(*app.get_subcommand(name), on);
}

}  // namespace weft::tool
