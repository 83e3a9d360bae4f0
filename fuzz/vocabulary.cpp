// A vocabulary as a checkpoint of `sentiment` / `attention` stores it (the asset's JSON, one
// word per entry), rebuilt as weft infer does, then asked for a few words.
#include "fuzz_target.h"
#include "models/sentiment_data.h"
#include "weft/io/json_lines.h"

using namespace weft;

WEFT_FUZZ_TARGET(vocabulary) {
  const nlohmann::json words = io::parse_json(input, "fuzz:1", "vocabulary");
  const io::Vocabulary vocabulary =
      models::vocabulary_from_asset(nlohmann::json{{"vocabulary", words}}, "sentiment");
  for (const char* word : {"<unk>", "film", "", "\xff"}) (void)vocabulary.find(word);
  if (vocabulary.size() > 0) (void)vocabulary.word(std::int32_t(vocabulary.size() - 1));
}
