// --batch-invariant on the commands that compute (train, eval, infer, serve and each bench): the
// backend's batch-invariant mode (weft/backend/cpu.h) for the run. `weft serve` and `weft bench
// serve` answer in the mode unless --no-batch-invariant or WEFT_BATCH_INVARIANT=0 says otherwise
// (its cost there measured within 10%: BENCHMARKS.md, "Batch invariance"); the other commands
// only when asked, by the flag or WEFT_BATCH_INVARIANT=1.
#include <CLI/CLI.hpp>

#include <cstdlib>

#include "commands.h"
#include "weft/backend/cpu.h"

namespace weft::tool {
namespace {

constexpr const char* kHelp =
    "Batch-invariant mode: each example's outputs are bit-identical whatever batch it is in "
    "(same machine and build; README, \"Batch invariance\")";
constexpr const char* kServeHelp =
    "Batch-invariant mode (the default here): a request's answer is bit-identical whichever "
    "requests share its batch (README, \"Batch invariance\")";
constexpr const char* kOffHelp =
    "Answer outside the batch-invariant mode (its answers may then differ in the last float32 "
    "bits with the batch's company)";

bool serves(const CLI::App& command) { return command.get_name() == "serve"; }

// The commands a flag goes on: those without subcommands under `command`, or itself.
void add_to_leaves(CLI::App& command, BatchInvariantFlags& flags) {
  const std::vector<CLI::App*> subcommands = command.get_subcommands({});
  if (!subcommands.empty()) {
    for (CLI::App* sub : subcommands) add_to_leaves(*sub, flags);
    return;
  }
  if (!serves(command)) {
    command.add_flag("--batch-invariant", flags.on, kHelp);
    return;
  }
  CLI::Option* on = command.add_flag("--batch-invariant", flags.on, kServeHelp);
  command.add_flag("--no-batch-invariant", flags.off, kOffHelp)->excludes(on);
  flags.serving_commands.push_back(&command);
}

}  // namespace

void add_batch_invariant_flag(CLI::App& app, BatchInvariantFlags& flags) {
  for (const char* name : {"train", "eval", "infer", "serve", "bench"})
    add_to_leaves(*app.get_subcommand(name), flags);
}

void apply_batch_invariant_flag(const BatchInvariantFlags& flags) {
  if (flags.on || flags.off) return set_batch_invariant(flags.on);
  const char* variable = std::getenv("WEFT_BATCH_INVARIANT");
  if (variable != nullptr && *variable != '\0') return;  // the backend reads it
  for (const CLI::App* command : flags.serving_commands)
    if (command->parsed()) return set_batch_invariant(true);
}

}  // namespace weft::tool
