// The options every model has (models/options.h), first in every registry entry's schema.
#include "weft/models/options.h"

namespace weft::models {

const std::vector<OptionSpec>& common_options() {
  static const std::vector<OptionSpec> options = {
      {.name = "seed",
       .kind = OptionKind::kInt,
       .default_value = 1,
       .help = "Seed of the data (order, splits, generated sets), initial weights and dropout",
       .role = OptionRole::kData,
       .min = 0},
      {.name = "data_dir",
       .kind = OptionKind::kString,
       .default_value = "../shared/data",
       .help = "Folder holding the data sets (sst/, glove-sst/, tatoeba-langid/, molecules/)",
       .role = OptionRole::kData},
      {.name = "max_train",
       .kind = OptionKind::kInt,
       .default_value = 0,
       .help = "Use at most this many training examples (0: the model's default, all)",
       .role = OptionRole::kData,
       .min = 0},
      {.name = "max_eval",
       .kind = OptionKind::kInt,
       .default_value = 0,
       .help = "Use at most this many dev / test examples (0: the model's default, all)",
       .role = OptionRole::kData,
       .min = 0},
      {.name = "weave_threads",
       .kind = OptionKind::kInt,
       .default_value = 0,
       .help = "Threads weaving a batch (0: all cores)",
       .role = OptionRole::kRuntime,
       .min = 0,
       .max = 1024},
      {.name = "loom_strategy",
       .kind = OptionKind::kString,
       .default_value = "auto",
       .help = "How the loom schedules a batch's calls: by_depth, sinks_last (by depth, calls "
               "nothing consumes at the last depth), agenda, or auto (the model's choice, the "
               "one nearest the schedule's lower bound on its data)",
       .role = OptionRole::kRuntime,
       .choices = {"auto", "by_depth", "sinks_last", "agenda"}},
      {.name = "max_step_rows",
       .kind = OptionKind::kInt,
       .default_value = 0,
       .help = "Run loom steps of more calls as batched calls of at most this many rows, so a "
               "level's arrays stay in cache (0: whole steps)",
       .role = OptionRole::kRuntime,
       .min = 0,
       .max = 1 << 30},
      {.name = "device",
       .kind = OptionKind::kString,
       .default_value = "cpu",
       .help = "Where the parameters live and the batches run",
       .role = OptionRole::kRuntime,
       .choices = {"cpu", "cuda"}},
  };
  return options;
}

}  // namespace weft::models
