// Tatoeba language-identification files: TAB-separated lines, malformed lines rejected with
// file:line:column, empty sentences skipped or rejected per option, the test overlap removed
// from training, and the real files' counts (10 x 1000 train, 2000 test, 104 overlapping).
#include "weft/io/tatoeba.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "io_test_util.h"
#include "weft/core/error.h"

namespace weft::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

class IoTatoeba : public IoTempDir {
 protected:
  std::string error(const std::string& text, io::LangIdOptions options = {},
                    std::string_view language = "") {
    const std::string path = write_file("eng_3.csv", text);
    try {
      io::read_tatoeba_file(path, options, language);
    } catch (const Error& e) {
      std::string message = e.what();
      message.replace(message.find(path), path.size(), "eng_3.csv");
      return message;
    }
    return "no error";
  }
};

TEST_F(IoTatoeba, ReadsSentencesWithQuotesAndSkipsEmptyOnes) {
  const std::string path =
      write_file("eng_3.csv", "1\teng\tHe said \"hi\", then left.\n\n2\teng\t  \n3\teng\tOK.\r\n");
  const io::LangIdFile file = io::read_tatoeba_file(path, {}, "eng");
  ASSERT_EQ(file.sentences.size(), 2u);
  EXPECT_EQ(file.sentences[0].text, "He said \"hi\", then left.");
  EXPECT_EQ(file.sentences[0].id, 1);
  EXPECT_EQ(file.sentences[1].text, "OK.");
  EXPECT_EQ(file.sentences[1].line, 4);
  EXPECT_EQ(file.skipped, (std::vector<std::string>{path + ":3: empty sentence (id 2)"}));
  EXPECT_THAT([&] { io::read_tatoeba_file(path, {.empty_sentences = io::OnBadRow::kReject}); },
              ThrowsMessage<Error>("[tatoeba] " + path + ":3: empty sentence (id 2)"));
}

TEST_F(IoTatoeba, RejectsMalformedLines) {
  EXPECT_EQ(error("1\teng\n"),
            "[tatoeba] eng_3.csv:1:6: expected 3 TAB-separated fields (id, language, text) but "
            "found 2");
  EXPECT_EQ(error("1\teng\ta\tb\n"),
            "[tatoeba] eng_3.csv:1:8: expected 3 TAB-separated fields (id, language, text) but "
            "found a 4th");
  EXPECT_EQ(error("x1\teng\ta\n"),
            "[tatoeba] eng_3.csv:1:1: expected a sentence id (an integer) but found 'x1'");
  EXPECT_EQ(error("1\t\ta\n"),
            "[tatoeba] eng_3.csv:1:3: expected a language code but found nothing");
  EXPECT_EQ(
      error("1\teng\ta\n2\tfra\tb\n", {}, "eng"),
      "[tatoeba] eng_3.csv:2:3: expected language 'eng' (from the file name) but found 'fra'");
}

TEST_F(IoTatoeba, LoadsADirectoryAndRemovesTheTestOverlap) {
  write_file("eng_2.csv", "1\teng\tHello.\n2\teng\tBye.\n");
  write_file("fra_2.csv", "3\tfra\tBonjour.\n4\tfra\tSalut.\n");
  write_file("testset.csv", "2\teng\tBye.\n5\tfra\tMerci.\n");
  const io::LangIdCorpus corpus = io::load_tatoeba_langid(dir_.string());
  EXPECT_EQ(corpus.languages, (std::vector<std::string>{"eng", "fra"}));
  EXPECT_EQ(corpus.overlap_removed, 1);
  ASSERT_EQ(corpus.train.size(), 3u);
  EXPECT_EQ(corpus.train[1].id, 3);
  EXPECT_EQ(corpus.test.size(), 2u);
  EXPECT_EQ(corpus.label("fra"), 1);
  EXPECT_THAT([&] { corpus.label("deu"); },
              ThrowsMessage<Error>("[tatoeba] unknown language 'deu' (known: eng, fra)"));
  write_file("testset.csv", "6\tdeu\tDanke.\n");
  EXPECT_THAT(
      [&] { io::load_tatoeba_langid(dir_.string()); },
      ThrowsMessage<Error>(HasSubstr("testset.csv:1: language 'deu' has no training file")));
}

TEST(IoTatoebaData, TenLanguagesAnd104OverlappingSentences) {
  WEFT_REQUIRE_DATA("tatoeba-langid/testset.csv");
  const io::LangIdCorpus corpus = io::load_tatoeba_langid(io_data_path("tatoeba-langid"));
  EXPECT_EQ(corpus.languages, (std::vector<std::string>{"cat", "cmn", "eng", "fra", "glg", "ita",
                                                        "jpn", "kor", "por", "spa"}));
  EXPECT_EQ(corpus.overlap_removed, 104);
  EXPECT_EQ(corpus.train.size(), 10000u - 104u);
  EXPECT_EQ(corpus.test.size(), 2000u);
  EXPECT_TRUE(corpus.skipped.empty());
  std::map<std::string, int> test_per_language;
  for (const io::LangIdSentence& s : corpus.test) ++test_per_language[s.language];
  for (const auto& [language, count] : test_per_language) EXPECT_EQ(count, 200) << language;
}

}  // namespace
}  // namespace weft::testing
