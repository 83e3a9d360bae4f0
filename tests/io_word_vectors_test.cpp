// Word vectors: GloVe and word2vec text files read exactly, ragged and non-numeric lines
// rejected with file:line:column, embedding matrices with seeded random rows for missing
// words and their coverage, and the real glove-sst file against its PROVENANCE numbers.
#include "weft/io/word_vectors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "io_test_util.h"
#include "weft/core/error.h"

namespace weft::testing {
namespace {

using ::testing::HasSubstr;

class IoWordVectors : public IoTempDir {
 protected:
  std::string load_error(const std::string& text,
                         io::WordVectorOptions options = io::WordVectorOptions()) {
    const std::string path = write_file("v.txt", text);
    try {
      io::load_word_vectors(path, options);
    } catch (const Error& e) {
      std::string message = e.what();
      const std::size_t at = message.find(path);
      if (at != std::string::npos) message.replace(at, path.size(), "v.txt");
      return message;
    }
    return "no error";
  }
};

TEST_F(IoWordVectors, ReadsGloveLines) {
  const std::string path =
      write_file("g.txt", "the 0.5 -1 2e-1\n\n, 1.25 +3 -0\n2\u00a01 7 8 9\r\nthe 9 9 9\n");
  const io::WordVectors v = io::load_word_vectors(path);
  EXPECT_EQ(v.dim(), 3);
  EXPECT_EQ(v.vocabulary.words(), (std::vector<std::string>{"the", ",", "2\u00a01"}));
  EXPECT_EQ(v.vectors.shape(), (Shape{3, 3}));
  EXPECT_EQ(v.vectors.to_float_vector(),
            (std::vector<float>{0.5f, -1, 0.2f, 1.25f, 3, -0.0f, 7, 8, 9}));
  EXPECT_EQ(v.duplicates, 1);  // the second "the" is skipped; the first wins
}

TEST_F(IoWordVectors, ReadsWord2VecHeaderAndHonoursMaxWords) {
  const std::string path = write_file("w.txt", "3 2\na 1 2\nb 3 4\nc 5 6\n");
  const io::WordVectors v = io::load_word_vectors(path);
  EXPECT_EQ(v.vocabulary.words(), (std::vector<std::string>{"a", "b", "c"}));
  const io::WordVectors two = io::load_word_vectors(path, {.max_words = 2});
  EXPECT_EQ(two.vectors.to_float_vector(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(load_error("4 2\na 1 2\n", {.header = io::VectorHeader::kWord2Vec}),
            "[word_vectors] v.txt:1:1: the header announces 4 vectors but the file has 1");
  EXPECT_EQ(load_error("a 1 2\n", {.header = io::VectorHeader::kWord2Vec}),
            "[word_vectors] v.txt:1:1: expected a word2vec header \"count dim\" (two integers) "
            "but found 'a 1 2'");
  EXPECT_EQ(load_error("1 3\na 1 2\n", {.header = io::VectorHeader::kWord2Vec}),
            "[word_vectors] v.txt:2:3: expected 3 values (the header on line 1) but found 2");
  // Without a header, "1 3" is the word "1" with a one-value vector.
  const io::WordVectors plain =
      io::load_word_vectors(write_file("p.txt", "1 3\n2 4\n"), {.header = io::VectorHeader::kNone});
  EXPECT_EQ(plain.vocabulary.words(), (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(plain.dim(), 1);
}

TEST_F(IoWordVectors, RejectsRaggedAndNonNumericLines) {
  EXPECT_EQ(load_error("a 1 2 3\nb 1 2\n"),
            "[word_vectors] v.txt:2:6: expected 3 values (as on line 1) but found 2");
  EXPECT_EQ(load_error("a 1 2\nb 1 2 3 4\n"),
            "[word_vectors] v.txt:2:7: expected 2 values (as on line 1) but found 4");
  EXPECT_EQ(load_error("a 1 2\nb 1 x2\n"),
            "[word_vectors] v.txt:2:5: expected a number but found 'x2'");
  EXPECT_EQ(load_error("a 1 2\nb 1 2.5.1\n"),
            "[word_vectors] v.txt:2:5: expected a number but found '2.5.1'");
  EXPECT_EQ(load_error("\u00e9t\u00e9 1 nan\n"),
            "[word_vectors] v.txt:1:7: expected a finite float32 value but found 'nan'");
  EXPECT_EQ(load_error("a 1 1e999\n"),
            "[word_vectors] v.txt:1:5: expected a finite float32 value but found '1e999'");
  EXPECT_EQ(load_error("a 1\nlonely\n"),
            "[word_vectors] v.txt:2:7: expected values after the word but found none");
  EXPECT_THAT(load_error("3 2\na 1 2 3\n"),
              HasSubstr("v.txt:1:1: this line looks like a \"count dim\" header but the next "
                        "vector has 3 values, not 2"));
  EXPECT_THAT(load_error("", {}), "no error");
  EXPECT_THAT([&] { io::load_word_vectors((dir_ / "absent").string()); },
              ::testing::ThrowsMessage<Error>(HasSubstr("[word_vectors] cannot open '")));
}

io::WordVectors small_vectors() {
  io::WordVectors v;
  v.vocabulary.add("the");
  v.vocabulary.add("good");
  v.vocabulary.add("(");
  v.vectors = Tensor::from_vector(Shape{3, 2}, std::vector<float>{1, 2, 3, 4, 5, 6});
  return v;
}

TEST(IoEmbedding, CopiesFoundRowsAndDrawsSeededRowsForMissingWords) {
  io::Vocabulary vocabulary = io::Vocabulary::with_unknown();
  for (const char* w : {"good", "film", "the", "The"}) vocabulary.add(w);
  const io::EmbeddingMatrix e =
      io::build_embedding_matrix(vocabulary, small_vectors(), {.seed = 7});
  EXPECT_EQ(e.matrix.shape(), (Shape{5, 2}));
  const std::vector<float> m = e.matrix.to_float_vector();
  EXPECT_EQ(m[2], 3);  // good
  EXPECT_EQ(m[3], 4);
  EXPECT_EQ(m[6], 1);  // the
  EXPECT_EQ(m[7], 2);
  for (int i : {0, 1, 4, 5, 8, 9}) {
    EXPECT_LE(std::abs(m[std::size_t(i)]), 0.05f) << i;
    EXPECT_NE(m[std::size_t(i)], 0.0f) << i;
  }
  EXPECT_EQ(e.pretrained, (std::vector<std::uint8_t>{0, 1, 0, 1, 0}));
  EXPECT_EQ(e.coverage.found, 2);
  EXPECT_EQ(e.coverage.total, 4);  // <unk> not counted
  EXPECT_EQ(e.coverage.missing, (std::vector<std::string>{"film", "The"}));
  EXPECT_DOUBLE_EQ(e.coverage.fraction(), 0.5);
  // Same seed, same matrix; another seed changes only the random rows.
  EXPECT_EQ(
      io::build_embedding_matrix(vocabulary, small_vectors(), {.seed = 7}).matrix.to_float_vector(),
      m);
  const std::vector<float> other =
      io::build_embedding_matrix(vocabulary, small_vectors(), {.seed = 8}).matrix.to_float_vector();
  EXPECT_NE(other[0], m[0]);
  EXPECT_EQ(other[2], m[2]);
}

TEST(IoEmbedding, GloveUncasedLookupFoldsCaseAndPtbEscapes) {
  io::Vocabulary vocabulary;
  for (const char* w : {"The", "-LRB-", "GOOD", "\\(", "x"}) vocabulary.add(w);
  const io::EmbeddingMatrix e = io::build_embedding_matrix(
      vocabulary, small_vectors(), {.lookup = io::VectorLookup::kGloveUncased});
  EXPECT_EQ(e.pretrained, (std::vector<std::uint8_t>{1, 1, 1, 1, 0}));
  const std::vector<float> m = e.matrix.to_float_vector();
  EXPECT_EQ(std::vector<float>(m.begin(), m.begin() + 8),
            (std::vector<float>{1, 2, 5, 6, 3, 4, 5, 6}));
  EXPECT_EQ(e.coverage.missing, (std::vector<std::string>{"x"}));
}

TEST(IoWordVectorsData, GloveSstMatchesProvenance) {
  WEFT_REQUIRE_DATA("glove-sst/glove.6B.100d.sst.txt");
  const io::WordVectors v = io::load_word_vectors(io_data_path("glove-sst/glove.6B.100d.sst.txt"));
  EXPECT_EQ(v.vocabulary.size(), 19503);
  EXPECT_EQ(v.dim(), 100);
  EXPECT_EQ(v.duplicates, 0);
  EXPECT_EQ(v.vocabulary.word(0), ".");
  const float* the = v.vectors.data<float>() + std::size_t(v.vocabulary.id("the")) * 100;
  EXPECT_EQ(std::vector<float>(the, the + 4),
            (std::vector<float>{-0.038194f, -0.24487f, 0.72812f, -0.39961f}));

  std::vector<io::SstTree> trees;
  for (const char* split : {"sst/train.txt", "sst/dev.txt", "sst/test.txt"}) {
    WEFT_REQUIRE_DATA(split);
    auto part = io::read_sst_file(io_data_path(split));
    trees.insert(trees.end(), part.begin(), part.end());
    if (std::string(split) == "sst/train.txt") {
      const io::EmbeddingMatrix train = io::build_embedding_matrix(io::build_vocabulary(part), v);
      EXPECT_EQ(train.coverage.found, 16647);
      EXPECT_EQ(train.coverage.total, 18280);
    }
  }
  const io::EmbeddingMatrix all = io::build_embedding_matrix(io::build_vocabulary(trees), v);
  EXPECT_EQ(all.coverage.found, 19503);
  EXPECT_EQ(all.coverage.total, 21701);
  ASSERT_FALSE(all.coverage.missing.empty());
  EXPECT_EQ(all.coverage.missing[0], "a");  // the most frequent token without a vector
  WEFT_REQUIRE_DATA("glove-sst/missing_tokens.txt");
  std::ifstream in(io_data_path("glove-sst/missing_tokens.txt"));
  std::set<std::string> listed;
  for (std::string line; std::getline(in, line);) listed.insert(line.substr(0, line.find('\t')));
  EXPECT_EQ(std::set<std::string>(all.coverage.missing.begin(), all.coverage.missing.end()),
            listed);
}

}  // namespace
}  // namespace weft::testing
