// Vocabulary: ids in insertion order, the unknown-word id, errors for absent words and bad
// ids, and construction from SST trees ordered by frequency (the real corpus: 21,701 types).
#include "weft/io/vocabulary.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "io_test_util.h"
#include "weft/core/error.h"

namespace weft::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(IoVocabulary, AssignsIdsInOrderAndFindsWords) {
  io::Vocabulary vocabulary;
  EXPECT_EQ(vocabulary.add("the"), 0);
  EXPECT_EQ(vocabulary.add("cat"), 1);
  EXPECT_EQ(vocabulary.add("the"), 0);
  EXPECT_EQ(vocabulary.size(), 2);
  EXPECT_EQ(vocabulary.id("cat"), 1);
  EXPECT_EQ(vocabulary.word(1), "cat");
  EXPECT_EQ(vocabulary.find("dog"), std::nullopt);
  EXPECT_FALSE(vocabulary.has_unknown());
  EXPECT_THAT([&] { vocabulary.id("dog"); },
              ThrowsMessage<Error>(HasSubstr(
                  "[vocabulary] unknown word 'dog' and the vocabulary has no unknown-word id")));
  EXPECT_THAT([&] { vocabulary.word(2); },
              ThrowsMessage<Error>(
                  HasSubstr("[vocabulary] id 2 is out of range for a vocabulary of 2 words")));
  EXPECT_THAT([&] { vocabulary.unknown_id(); }, ThrowsMessage<Error>(HasSubstr("no unknown")));
}

TEST(IoVocabulary, UnknownWordsMapToTheUnknownId) {
  io::Vocabulary vocabulary = io::Vocabulary::with_unknown("<unk>");
  vocabulary.add("good");
  EXPECT_EQ(vocabulary.unknown_id(), 0);
  EXPECT_EQ(vocabulary.ids({"good", "bad", "<unk>"}), (std::vector<std::int32_t>{1, 0, 0}));
  EXPECT_TRUE(vocabulary.contains("<unk>"));
  EXPECT_FALSE(vocabulary.contains("bad"));
}

TEST(IoVocabulary, BuildsFromTreesByFrequencyThenFirstAppearance) {
  const auto trees = io::read_sst_string(
      "(2 (2 b) (2 (2 a) (2 c)))\n"
      "(2 (2 c) (2 (2 d) (2 c)))\n"
      "(2 (2 a) (2 e))\n");
  const io::Vocabulary all = io::build_vocabulary(trees);
  EXPECT_EQ(all.words(), (std::vector<std::string>{"<unk>", "c", "a", "b", "d", "e"}));
  const io::Vocabulary common = io::build_vocabulary(trees, {.min_count = 2, .unknown_token = ""});
  EXPECT_EQ(common.words(), (std::vector<std::string>{"c", "a"}));
  EXPECT_FALSE(common.has_unknown());
}

TEST(IoVocabularyData, SstHas21701CaseSensitiveTypes) {
  std::vector<io::SstTree> trees;
  for (const char* split : {"sst/train.txt", "sst/dev.txt", "sst/test.txt"}) {
    WEFT_REQUIRE_DATA(split);
    auto part = io::read_sst_file(io_data_path(split));
    trees.insert(trees.end(), part.begin(), part.end());
  }
  const io::Vocabulary vocabulary = io::build_vocabulary(trees);
  EXPECT_EQ(vocabulary.size(), 21701 + 1);  // + <unk>
  EXPECT_EQ(vocabulary.word(1), ".");       // the most frequent token
}

}  // namespace
}  // namespace weft::testing
