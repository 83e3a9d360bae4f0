// `weft infer sentiment` / `attention` lines (a bracketed tree or its JSON form) encoded with a
// small vocabulary, as the models' parse_example does.
#include "fuzz_target.h"
#include "models/sentiment_data.h"
#include "weft/io/vocabulary.h"

using namespace weft;

WEFT_FUZZ_TARGET(infer_sentiment) {
  static const io::Vocabulary vocabulary = [] {
    io::Vocabulary v = io::Vocabulary::with_unknown();
    for (const char* word : {"a", "good", "film", "not", "bad", "."}) v.add(word);
    return v;
  }();
  (void)models::sentiment_example_from_text(input, "fuzz:1", vocabulary);
}
