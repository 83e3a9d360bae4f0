// Checkpoints as `weft infer --checkpoint F` opens them (models::load_model): the metadata, the
// training state, the stored options and assets, the model built from them, the parameters.
#include "fuzz_target.h"
#include "weft/models/saved_model.h"

using namespace weft;

WEFT_FUZZ_TARGET(checkpoint) {
  const fuzz::MemoryFile file(input);
  (void)models::load_model(file.path(), models::ModelUse::kInfer);
}
