// Tatoeba sentences for language identification (shared/data/tatoeba-langid): lines of
// "id<TAB>language<TAB>text", one training file per language ("eng_1000.csv") and a mixed
// test file. The two samples overlap (104 test ids also occur in training), so the loader
// removes test sentences from the training set and says how many it removed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "weft/core/export.h"
#include "weft/io/csv.h"

WEFT_API_BEGIN
namespace weft::io {

struct LangIdSentence {
  std::int64_t id = 0;   // Tatoeba sentence id
  std::string language;  // ISO 639-3 code, e.g. "eng"
  std::string text;
  std::int64_t line = 0;  // in its file
};

struct LangIdOptions {
  // Empty (or all-space) sentences: reject (throw) or skip and list them.
  OnBadRow empty_sentences = OnBadRow::kSkip;
};

struct LangIdFile {
  std::vector<LangIdSentence> sentences;
  std::vector<std::string> skipped;  // "file:line: empty sentence (id N)"
};

// Reads one file. Throws "[tatoeba] file:line:column: ..." for a line without exactly three
// TAB-separated fields, a non-integer id, an empty language, or (when `expected_language`
// is given) a language other than it.
LangIdFile read_tatoeba_file(const std::string& path, const LangIdOptions& options = {},
                             std::string_view expected_language = "");

// Drops from `train` every sentence whose id occurs in `test`; returns how many it dropped.
std::int64_t remove_test_overlap(std::vector<LangIdSentence>& train,
                                 const std::vector<LangIdSentence>& test);

struct LangIdCorpus {
  std::vector<std::string> languages;  // sorted; a sentence's label is its index here
  std::vector<LangIdSentence> train;   // all "<lang>_*.csv" files, test overlap removed
  std::vector<LangIdSentence> test;
  std::int64_t overlap_removed = 0;
  std::vector<std::string> skipped;

  // The label of a language; throws naming the known languages when it is not one.
  int label(std::string_view language) const;
};

// Reads every "<lang>_<n>.csv" training file in `dir` (in name order) and `test_file`.
// Throws when a test sentence's language has no training file.
LangIdCorpus load_tatoeba_langid(const std::string& dir, const LangIdOptions& options = {},
                                 const std::string& test_file = "testset.csv");

}  // namespace weft::io
WEFT_API_END
