// A model's options: the schema machinery is the core layer's (weft/core/options.h), shared with
// the Trainer's options; this adds the options every model has.
#pragma once

#include <vector>

#include "weft/core/export.h"
#include "weft/core/options.h"

WEFT_API_BEGIN
namespace weft::models {

using weft::OptionKind;
using weft::OptionRole;
using weft::OptionSpec;
using weft::OptionValues;

// The options every model has, first in every schema: seed, data_dir, max_train, max_eval,
// weave_threads, loom_strategy, max_step_rows, device.
const std::vector<OptionSpec>& common_options();

}  // namespace weft::models
WEFT_API_END
