// `weft infer calculator` lines: parse_example, then a prediction on what it accepted, with a
// small untrained calculator.
#include <memory>

#include "fuzz_target.h"
#include "weft/models/registry.h"

using namespace weft;

namespace {
models::Model& calculator() {
  static const std::unique_ptr<models::Model> model = [] {
    models::OptionValues options = models::find_model("calculator").default_options();
    options.update({{"hidden", 8}, {"max_train", 4}, {"max_eval", 4}}, "fuzz");
    return models::create_model(options, {.use = models::ModelUse::kInfer});
  }();
  return *model;
}
}  // namespace

WEFT_FUZZ_TARGET(infer_calculator) {
  models::Model& model = calculator();
  const nlohmann::json example = model.parse_example(input, "fuzz:1");
  (void)model.predict(std::vector<nlohmann::json>{example});
}
