// SST trees as the dynamic JSON-like inputs that blocks consume: a leaf becomes
// {"label": 3, "word": "good"}, an internal node {"label": 2, "children": [...]}. Kept apart
// from sst.h so that reading trees does not pull nlohmann-json into every includer.
#pragma once

#include <nlohmann/json.hpp>

#include "weft/core/export.h"
#include "weft/io/sst.h"

WEFT_API_BEGIN
namespace weft::io {

nlohmann::json to_input(const SstTree& tree);

// The inverse of to_input; throws weft::Error "[sst] ..." naming the path inside the value
// (e.g. "children[1].label") when the value is not of that form.
SstTree sst_tree_from_input(const nlohmann::json& value);

}  // namespace weft::io
WEFT_API_END
