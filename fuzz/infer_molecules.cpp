// `weft infer molecules` lines (a SMILES string or {"smiles": "..."}): parse_example, then a
// prediction on what it accepted, with a small untrained ESOL model built from checkpoint-style
// assets.
#include <memory>

#include "fuzz_target.h"
#include "weft/io/molecule_graph.h"
#include "weft/models/registry.h"

using namespace weft;

namespace {
models::Model& molecules() {
  static const std::unique_ptr<models::Model> model = [] {
    models::OptionValues options = models::find_model("molecules").default_options();
    options.update({{"hidden", 8}, {"pair_hidden", 4}, {"graph_hidden", 8}, {"task", "esol"}},
                   "fuzz");
    const nlohmann::json assets{
        {"tasks", {"log_solubility"}}, {"target_mean", -3.0}, {"target_scale", 2.0}};
    return models::create_model(options, {.use = models::ModelUse::kInfer, .assets = &assets});
  }();
  return *model;
}
}  // namespace

WEFT_FUZZ_TARGET(infer_molecules) {
  if (!io::smiles_parser_available()) return;  // built without RDKit: nothing to fuzz
  models::Model& model = molecules();
  const nlohmann::json example = model.parse_example(input, "fuzz:1");
  (void)model.predict(std::vector<nlohmann::json>{example});
}
