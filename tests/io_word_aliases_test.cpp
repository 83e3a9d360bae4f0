// Word-alias tables: pairs read with comments and blank lines skipped, malformed lines rejected
// with file:line:column, an embedding matrix whose aliased rows are exactly the table's words
// that lack a vector of their own (and whose alias has one), and the shipped SST table's coverage
// of glove-sst.
#include "weft/io/word_aliases.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "io_test_util.h"
#include "models/sentiment_data.h"
#include "weft/core/error.h"
#include "weft/io/sst.h"
#include "weft/io/word_vectors.h"

namespace weft::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Pairs = std::vector<std::pair<std::string, std::string>>;

TEST(IoWordAliases, ReadsPairsSkippingCommentsAndBlankLines) {
  const io::WordAliases t =
      io::parse_word_aliases("# a comment\n\nn't   not\n  # indented comment\na\tan\r\n's is", "t");
  EXPECT_EQ(t.pairs, (Pairs{{"n't", "not"}, {"a", "an"}, {"'s", "is"}}));
  EXPECT_EQ(t.lines, (std::vector<std::int64_t>{3, 5, 6}));
  ASSERT_NE(t.find("a"), nullptr);
  EXPECT_EQ(*t.find("a"), "an");
  EXPECT_EQ(t.find("A"), nullptr);  // exact: case folding is the embedding lookup's business
  EXPECT_EQ(t.find("not"), nullptr);
  EXPECT_EQ(io::parse_word_aliases("", "empty").size(), 0u);
}

TEST(IoWordAliases, RejectsMalformedLinesWithFileLineAndColumn) {
  auto error = [](const std::string& text) {
    try {
      io::parse_word_aliases(text, "aliases.txt");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(error("a an\nn't\n"),
              HasSubstr("[word_aliases] aliases.txt:2:4: expected two fields \"word alias\" but "
                        "found 1"));
  EXPECT_THAT(error("# ok\na an the\n"), HasSubstr("aliases.txt:2:6: expected two fields"));
  EXPECT_THAT(error("a an\n\nb be\n a  the\n"),
              HasSubstr("aliases.txt:4:2: the word 'a' already has an alias (line 1)"));
  EXPECT_THAT(error("not not\n"), HasSubstr("aliases.txt:1:5: the word 'not' is its own alias"));
}

class IoWordAliasFiles : public IoTempDir {};

TEST_F(IoWordAliasFiles, LoadsAFileAndNamesAMissingOne) {
  const std::string path = write_file("a.txt", "n't not\nx\n");
  EXPECT_THAT([&] { io::load_word_aliases(path); },
              ThrowsMessage<Error>(HasSubstr(path + ":2:2: expected two fields")));
  write_file("b.txt", "n't not\n");
  EXPECT_EQ(io::load_word_aliases((dir_ / "b.txt").string()).pairs, (Pairs{{"n't", "not"}}));
  EXPECT_THAT([&] { io::load_word_aliases((dir_ / "none.txt").string()); },
              ThrowsMessage<Error>(HasSubstr("cannot open")));
}

io::WordVectors small_vectors() {
  io::WordVectors v;
  for (const char* w : {"the", "good", "not"}) v.vocabulary.add(w);
  v.vectors = Tensor::from_vector(Shape{3, 2}, std::vector<float>{1, 2, 3, 4, 5, 6});
  return v;
}

TEST(IoWordAliases, FillExactlyTheTableWordsWithoutAVector) {
  io::Vocabulary vocabulary = io::Vocabulary::with_unknown();
  for (const char* w : {"good", "n't", "A", "film", "bad", "x", "y"}) vocabulary.add(w);
  const io::WordAliases table = io::parse_word_aliases(
      "n't not\n"
      "a the\n"        // "A" through its lower case (kGloveUncased)
      "good not\n"     // good has its own vector: the alias is not used
      "bad missing\n"  // the alias has no vector: bad stays random
      "unused the\n",  // not in the vocabulary
      "t");
  const io::EmbeddingOptions options{
      .seed = 3, .lookup = io::VectorLookup::kGloveUncased, .aliases = &table};
  const io::EmbeddingMatrix e = io::build_embedding_matrix(vocabulary, small_vectors(), options);
  EXPECT_EQ(e.pretrained, (std::vector<std::uint8_t>{0, 1, 1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(e.coverage.aliased, (Pairs{{"n't", "not"}, {"A", "the"}}));
  EXPECT_EQ(e.coverage.found, 3);
  EXPECT_EQ(e.coverage.total, 7);
  EXPECT_EQ(e.coverage.missing, (std::vector<std::string>{"film", "bad", "x", "y"}));
  const std::vector<float> m = e.matrix.to_float_vector();
  EXPECT_EQ(std::vector<float>(m.begin() + 2, m.begin() + 8),
            (std::vector<float>{3, 4, 5, 6, 1, 2}));  // good, n't = not, A = the
  // Without aliases the other rows are the same random values (drawn for every row).
  io::EmbeddingOptions plain = options;
  plain.aliases = nullptr;
  const io::EmbeddingMatrix p = io::build_embedding_matrix(vocabulary, small_vectors(), plain);
  EXPECT_EQ(p.coverage.found, 1);
  EXPECT_TRUE(p.coverage.aliased.empty());
  const std::vector<float> pm = p.matrix.to_float_vector();
  EXPECT_EQ(std::vector<float>(pm.begin() + 8, pm.end()),
            std::vector<float>(m.begin() + 8, m.end()));
  // An exact lookup does not fold "A" to the "a" line.
  io::EmbeddingOptions exact = options;
  exact.lookup = io::VectorLookup::kExact;
  EXPECT_EQ(io::build_embedding_matrix(vocabulary, small_vectors(), exact).coverage.aliased,
            (Pairs{{"n't", "not"}}));
}

// The shipped table against the real vectors: the coverage EXPERIMENTS.md reports.
TEST(IoWordAliasesData, ShippedSstTableCoverage) {
  WEFT_REQUIRE_DATA("glove-sst/glove.6B.100d.sst.txt");
  const io::WordAliases table = io::parse_word_aliases(models::shipped_sst_aliases(), "shipped");
  EXPECT_EQ(*table.find("n't"), "not");
  const io::WordVectors v = io::load_word_vectors(io_data_path("glove-sst/glove.6B.100d.sst.txt"));
  std::vector<io::SstTree> trees;
  for (const char* split : {"sst/train.txt", "sst/dev.txt", "sst/test.txt"}) {
    WEFT_REQUIRE_DATA(split);
    auto part = io::read_sst_file(io_data_path(split));
    trees.insert(trees.end(), part.begin(), part.end());
  }
  const io::Vocabulary vocabulary = io::build_vocabulary(trees);
  const io::EmbeddingMatrix e = io::build_embedding_matrix(
      vocabulary, v, {.lookup = io::VectorLookup::kGloveUncased, .aliases = &table});
  std::map<std::string, std::string> filled(e.coverage.aliased.begin(), e.coverage.aliased.end());
  EXPECT_EQ(filled["n't"], "not");
  EXPECT_EQ(filled["a"], "an");
  EXPECT_EQ(filled["A"], "an");
  EXPECT_EQ(filled["I"], "me");
  EXPECT_EQ(filled["'s"], "is");
  EXPECT_EQ(filled["..."], ".");
  EXPECT_EQ(filled.count("Mr."), 0u);  // "mister" has no vector in glove-sst
  EXPECT_EQ(e.coverage.found - std::int64_t(e.coverage.aliased.size()), 19503);
  EXPECT_EQ(e.coverage.total, 21701);
  EXPECT_EQ(std::int64_t(e.coverage.aliased.size()), 51);
}

}  // namespace
}  // namespace weft::testing
