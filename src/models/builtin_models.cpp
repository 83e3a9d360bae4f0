// The built-in models, one line each, in the order the registry lists them (registry.cpp
// registers them before any a program adds). A new model defines `ModelEntry <name>_entry()` in
// its own .cpp and adds its line here; no model header knows the registry, and nothing includes
// this file.
#include <vector>

#include "weft/models/registry.h"

#define WEFT_BUILTIN_MODELS(X) \
  X(calculator)                \
  X(sentiment)                 \
  X(attention)                 \
  X(langid)                    \
  X(molecules)                 \
  X(tree2seq)                  \
  X(seq2tree)

namespace weft::models {

#define WEFT_DECLARE_ENTRY(model) ModelEntry model##_entry();
WEFT_BUILTIN_MODELS(WEFT_DECLARE_ENTRY)
#undef WEFT_DECLARE_ENTRY

std::vector<ModelEntry> builtin_model_entries() {
#define WEFT_CALL_ENTRY(model) model##_entry(),
  return {WEFT_BUILTIN_MODELS(WEFT_CALL_ENTRY)};
#undef WEFT_CALL_ENTRY
}

}  // namespace weft::models
