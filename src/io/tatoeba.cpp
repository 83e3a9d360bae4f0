// Tatoeba language-identification files (see weft/io/tatoeba.h): TAB-separated lines read
// with the shared line reader, no CSV quoting (sentences contain bare quotes).
#include "weft/io/tatoeba.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <unordered_set>

#include "text_input.h"
#include "weft/core/error.h"

namespace weft::io {
namespace {

struct LineContext {
  const std::string& path;
  std::int64_t number;
  std::string_view line;

  [[noreturn]] void error(std::size_t offset, const std::string& message) const {
    fail("tatoeba", detail::position(path, number, line, offset), ": ", message);
  }
};

// Splits "id<TAB>lang<TAB>text" into `sentence`; false when the text is empty.
bool parse_line(const LineContext& at, std::string_view expected_language,
                LangIdSentence& sentence) {
  const std::string_view line = at.line;
  const std::size_t tab1 = line.find('\t');
  const std::size_t tab2 = tab1 == std::string_view::npos ? tab1 : line.find('\t', tab1 + 1);
  if (tab2 == std::string_view::npos)
    at.error(line.size(), weft::detail::concat_message(
                              "expected 3 TAB-separated fields (id, language, text) but found ",
                              tab1 == std::string_view::npos ? 1 : 2));
  if (const std::size_t tab3 = line.find('\t', tab2 + 1); tab3 != std::string_view::npos)
    at.error(tab3, "expected 3 TAB-separated fields (id, language, text) but found a 4th");
  const std::string_view id = line.substr(0, tab1);
  const auto [ptr, ec] = std::from_chars(id.data(), id.data() + id.size(), sentence.id);
  if (id.empty() || ec != std::errc() || ptr != id.data() + id.size())
    at.error(0, "expected a sentence id (an integer) but found " + detail::quoted(id));
  const std::string_view language = line.substr(tab1 + 1, tab2 - tab1 - 1);
  if (language.empty()) at.error(tab1 + 1, "expected a language code but found nothing");
  if (!expected_language.empty() && language != expected_language)
    at.error(tab1 + 1, "expected language '" + std::string(expected_language) +
                           "' (from the file name) but found " + detail::quoted(language));
  sentence.language = std::string(language);
  sentence.text = std::string(line.substr(tab2 + 1));
  sentence.line = at.number;
  return !detail::trim_blanks(sentence.text).empty();
}

}  // namespace

LangIdFile read_tatoeba_file(const std::string& path, const LangIdOptions& options,
                             std::string_view expected_language) {
  detail::LineReader reader(path, "tatoeba");
  LangIdFile file;
  std::string_view line;
  while (reader.next(line)) {
    if (detail::trim_blanks(line).empty()) continue;
    const LineContext at{path, reader.line_number(), line};
    LangIdSentence sentence;
    if (parse_line(at, expected_language, sentence)) {
      file.sentences.push_back(std::move(sentence));
      continue;
    }
    const std::string message = weft::detail::concat_message(
        path, ":", at.number, ": empty sentence (id ", sentence.id, ")");
    if (options.empty_sentences == OnBadRow::kReject) fail("tatoeba", message);
    file.skipped.push_back(message);
  }
  return file;
}

std::int64_t remove_test_overlap(std::vector<LangIdSentence>& train,
                                 const std::vector<LangIdSentence>& test) {
  std::unordered_set<std::int64_t> test_ids;
  for (const LangIdSentence& s : test) test_ids.insert(s.id);
  const auto before = train.size();
  std::erase_if(train, [&](const LangIdSentence& s) { return test_ids.count(s.id) > 0; });
  return std::int64_t(before - train.size());
}

int LangIdCorpus::label(std::string_view language) const {
  const auto found = std::lower_bound(languages.begin(), languages.end(), language);
  if (found == languages.end() || *found != language) {
    std::string known;
    for (const std::string& l : languages) known += (known.empty() ? "" : ", ") + l;
    fail("tatoeba", "unknown language '", language, "' (known: ", known, ")");
  }
  return int(found - languages.begin());
}

LangIdCorpus load_tatoeba_langid(const std::string& dir, const LangIdOptions& options,
                                 const std::string& test_file) {
  namespace fs = std::filesystem;
  std::error_code error;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name != test_file && entry.path().extension() == ".csv" &&
        name.find('_') != std::string::npos)
      files.push_back(entry.path());
  }
  if (error) fail("tatoeba", "cannot list '", dir, "': ", error.message());
  if (files.empty()) fail("tatoeba", "no training files \"<lang>_<n>.csv\" in '", dir, "'");
  std::sort(files.begin(), files.end());
  LangIdCorpus corpus;
  for (const fs::path& path : files) {
    const std::string name = path.filename().string();
    const std::string language = name.substr(0, name.find('_'));
    LangIdFile file = read_tatoeba_file(path.string(), options, language);
    corpus.languages.push_back(language);
    std::move(file.sentences.begin(), file.sentences.end(), std::back_inserter(corpus.train));
    std::move(file.skipped.begin(), file.skipped.end(), std::back_inserter(corpus.skipped));
  }
  std::sort(corpus.languages.begin(), corpus.languages.end());
  corpus.languages.erase(std::unique(corpus.languages.begin(), corpus.languages.end()),
                         corpus.languages.end());
  LangIdFile test = read_tatoeba_file((fs::path(dir) / test_file).string(), options);
  for (const LangIdSentence& s : test.sentences)
    if (!std::binary_search(corpus.languages.begin(), corpus.languages.end(), s.language))
      fail("tatoeba", (fs::path(dir) / test_file).string(), ":", s.line, ": language '", s.language,
           "' has no training file in '", dir, "'");
  corpus.test = std::move(test.sentences);
  std::move(test.skipped.begin(), test.skipped.end(), std::back_inserter(corpus.skipped));
  corpus.overlap_removed = remove_test_overlap(corpus.train, corpus.test);
  return corpus;
}

}  // namespace weft::io
