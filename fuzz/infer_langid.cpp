// `weft infer langid` lines (a sentence, or "id<TAB>lang<TAB>sentence"): parse_example, then a
// prediction on what it accepted, with a small untrained model built from checkpoint-style
// assets (three languages, the ASCII letters and a few accented ones).
#include <memory>

#include "fuzz_target.h"
#include "weft/models/registry.h"

using namespace weft;

namespace {
models::Model& langid() {
  static const std::unique_ptr<models::Model> model = [] {
    models::OptionValues options = models::find_model("langid").default_options();
    options.update({{"hidden", 8}, {"char_hidden", 8}, {"char_embedding", 4}}, "fuzz");
    nlohmann::json characters = nlohmann::json::array();
    for (int c = 'a'; c <= 'z'; ++c) characters.push_back(c);
    for (int c : {0xe9, 0xe8, 0xfc, 0xdf}) characters.push_back(c);
    const nlohmann::json assets{{"languages", {"deu", "eng", "fra"}}, {"characters", characters}};
    return models::create_model(options, {.use = models::ModelUse::kInfer, .assets = &assets});
  }();
  return *model;
}
}  // namespace

WEFT_FUZZ_TARGET(infer_langid) {
  models::Model& model = langid();
  const nlohmann::json example = model.parse_example(input, "fuzz:1");
  (void)model.predict(std::vector<nlohmann::json>{example});
}
