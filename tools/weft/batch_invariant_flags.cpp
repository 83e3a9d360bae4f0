// --batch-invariant on the commands that compute (train, eval, infer, serve and each bench): the
// backend's batch-invariant mode (weft/backend/cpu.h) for the run. `weft serve` answers in it
// unless --no-batch-invariant (measured: BENCHMARKS.md, "Batch invariance"); the others are
// out of it unless asked, by the flag or WEFT_BATCH_INVARIANT=1.
#include <CLI/CLI.hpp>

#include "commands.h"
#include "weft/backend/cpu.h"

namespace weft::tool {
namespace {

constexpr const char* kHelp =
    "Batch-invariant mode: each example's outputs are bit-identical whatever batch it is in "
    "(same machine and build; see README)";

// The commands a flag goes on: those without subcommands under `command`, or itself.
void add_to_leaves(CLI::App& command, BatchInvariantFlags& flags, bool serve) {
  const std::vector<CLI::App*> subcommands = command.get_subcommands({});
  if (subcommands.empty()) {
    command.add_flag("--batch-invariant", flags.on, kHelp);
    if (serve)
      command.add_flag("--no-batch-invariant", flags.off,
                       "Answer outside the batch-invariant mode (on by default: an answer "
                       "does not depend on which requests share its batch)");
    return;
  }
  for (CLI::App* sub : subcommands) add_to_leaves(*sub, flags, serve);
}

}  // namespace

void add_batch_invariant_flags(CLI::App& app, BatchInvariantFlags& flags) {
  for (const char* name : {"train", "eval", "infer", "serve", "bench"})
    add_to_leaves(*app.get_subcommand(name), flags, std::string_view(name) == "serve");
}

void apply_batch_invariant_flags(const CLI::App& app, const BatchInvariantFlags& flags) {
  if (flags.on && flags.off)
    throw CLI::ValidationError("--batch-invariant and --no-batch-invariant exclude each other");
  const bool serving = app.got_subcommand("serve");
  if (flags.on || (serving && !flags.off))
    set_batch_invariant(true);
  else if (flags.off)
    set_batch_invariant(false);
}

}  // namespace weft::tool
