// The SST reader: trees of any arity, the no-break-space quirk, every malformed input
// rejected with "file:line:column: expected ... but found ...", statistics, the JSON input
// form, and the real train/dev/test files checked against their PROVENANCE numbers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "io_test_util.h"
#include "weft/core/error.h"
#include "weft/io/input_limits.h"
#include "weft/io/sst.h"
#include "weft/io/sst_json.h"

namespace weft::testing {
namespace {

using ::testing::HasSubstr;

std::string sst_error(std::string_view text) {
  try {
    io::parse_sst_tree(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(IoSst, ParsesABinaryTree) {
  const io::SstTree tree = io::parse_sst_tree("(3 (2 It) (4 (2 's) (3 good)))");
  EXPECT_EQ(tree.label, 3);
  ASSERT_EQ(tree.children.size(), 2u);
  EXPECT_EQ(tree.children[0].label, 2);
  EXPECT_EQ(tree.children[0].word, "It");
  EXPECT_TRUE(tree.children[0].is_leaf());
  EXPECT_EQ(tree.children[1].children[1].word, "good");
  EXPECT_EQ(tree.children[1].children[1].label, 3);
  EXPECT_EQ(io::leaf_words(tree), (std::vector<std::string>{"It", "'s", "good"}));
  const io::SstTreeStats stats = io::tree_stats(tree);
  EXPECT_EQ(stats.nodes, 5);
  EXPECT_EQ(stats.leaves, 3);
  EXPECT_EQ(stats.depth, 3);
  EXPECT_TRUE(stats.binary);
}

TEST(IoSst, AcceptsAnyArityAndExtraSpaces) {
  const io::SstTree tree = io::parse_sst_tree("  ( 1 (0 a)(2  b ) (3 (4 c)) )  ");
  ASSERT_EQ(tree.children.size(), 3u);
  EXPECT_EQ(tree.children[2].children.size(), 1u);
  EXPECT_EQ(io::leaf_words(tree), (std::vector<std::string>{"a", "b", "c"}));
  const io::SstTreeStats stats = io::tree_stats(tree);
  EXPECT_EQ(stats.nodes, 5);
  EXPECT_EQ(stats.depth, 3);
  EXPECT_FALSE(stats.binary);
  EXPECT_EQ(io::tree_stats(io::parse_sst_tree("(4 lone)")).depth, 1);
}

TEST(IoSst, SplitsOnAsciiSpaceOnlyKeepingNoBreakSpaceInTheToken) {
  const io::SstTree tree = io::parse_sst_tree("(2 (2 2\u00a01\\/2) (2 hours))");
  EXPECT_EQ(tree.children[0].word,
            "2\xC2\xA0"
            "1\\/2");
  EXPECT_EQ(tree.children[1].word, "hours");
}

TEST(IoSst, WritesBackWhatItReads) {
  const std::string text = "(3 (2 It) (4 (2 's) (1 (0 -LRB-) (3 good) (2 -RRB-))))";
  EXPECT_EQ(io::to_string(io::parse_sst_tree(text)), text);
  EXPECT_EQ(io::parse_sst_tree(io::to_string(io::parse_sst_tree(text))), io::parse_sst_tree(text));
}

TEST(IoSst, ReportsWhatWasExpectedWhere) {
  EXPECT_EQ(sst_error("(3 (2 It)"), "[sst] <string>:1:10: expected ')' but found end of line");
  EXPECT_EQ(sst_error("(7 word)"), "[sst] <string>:1:2: expected a label 0..4 but found '7'");
  EXPECT_EQ(sst_error("(NP word)"), "[sst] <string>:1:2: expected a label 0..4 but found 'NP'");
  EXPECT_EQ(sst_error("(2)"),
            "[sst] <string>:1:3: expected a word or '(' after the label but found ')'");
  EXPECT_EQ(sst_error("(2 a b)"), "[sst] <string>:1:6: expected ')' but found 'b'");
  EXPECT_THAT(sst_error("(2 a (2 b))"),
              HasSubstr("<string>:1:6: expected ')' after the word 'a' (a node holds either"));
  EXPECT_EQ(sst_error("(2 a) x"),
            "[sst] <string>:1:7: expected end of line after the tree but found 'x'");
  EXPECT_EQ(sst_error("2 a"), "[sst] <string>:1:1: expected '(' but found '2'");
  EXPECT_EQ(sst_error("(2 (1 a) b)"), "[sst] <string>:1:10: expected ')' but found 'b'");
  EXPECT_EQ(sst_error("()"), "[sst] <string>:1:2: expected a label 0..4 but found ')'");
  EXPECT_EQ(sst_error(")"), "[sst] <string>:1:1: expected '(' but found ')'");
}

TEST(IoSst, ColumnsCountCharactersNotBytes) {
  // 'é' is two bytes; 'b' is the sixth character.
  EXPECT_EQ(sst_error("(2 \u00e9 b)"), "[sst] <string>:1:6: expected ')' but found 'b'");
}

TEST(IoSst, RejectsHostileNestingWithoutCrashing) {
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "(2 ";
  const std::int64_t limit = io::input_limits().max_tree_depth;
  EXPECT_THAT(sst_error(deep),
              HasSubstr("<string>:1:" + std::to_string(3 * limit + 1) +
                        ": trees nested deeper than " + std::to_string(limit) + " levels"));
  EXPECT_THAT(sst_error(deep), HasSubstr("WEFT_LIMIT_TREE_DEPTH"));
  std::string ok;
  for (std::int64_t i = 0; i + 1 < limit; ++i) ok += "(2 ";
  ok += "(2 x)" + std::string(std::size_t(limit - 1), ')');
  EXPECT_EQ(io::tree_stats(io::parse_sst_tree(ok)).depth, limit);
}

using IoSstFile = IoTempDir;

TEST_F(IoSstFile, NamesTheFileAndLineAndSkipsBlankLines) {
  const std::string path = write_file("train.txt", "(2 a)\r\n\n   \n(3 (2 b) (4 c)\n");
  try {
    io::read_sst_file(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "[sst] " + path + ":4:15: expected ')' but found end of line");
  }
  const std::string good = write_file("good.txt", "(2 a)\r\n\n(3 (2 b) (4 c))\n(1 d)");
  const std::vector<io::SstTree> trees = io::read_sst_file(good);
  ASSERT_EQ(trees.size(), 3u);
  EXPECT_EQ(trees[0].word, "a");
  EXPECT_EQ(trees[2].label, 1);
  EXPECT_EQ(io::read_sst_string("(2 a)\n\n(3 (2 b) (4 c))\n(1 d)\n"), trees);
  EXPECT_THAT(sst_error("(2 a)\n(2 b)"), HasSubstr("expected end of line"));
  try {
    io::read_sst_string("(2 a)\n(2 b c)", "inline");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "[sst] inline:2:6: expected ')' but found 'c'");
  }
}

TEST_F(IoSstFile, MissingFileIsAnError) {
  try {
    io::read_sst_file((dir_ / "absent.txt").string());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("[sst] cannot open '"));
    EXPECT_THAT(e.what(), HasSubstr("absent.txt': No such file or directory"));
  }
}

TEST(IoSst, CorpusStatsCountLabels) {
  const auto trees = io::read_sst_string("(3 (2 It) (4 (2 's) (3 good)))\n(0 (0 bad) (1 (2 x)))\n");
  const io::SstCorpusStats stats = io::corpus_stats(trees);
  EXPECT_EQ(stats.trees, 2);
  EXPECT_EQ(stats.nodes, 9);
  EXPECT_EQ(stats.leaves, 5);
  EXPECT_EQ(stats.max_leaves, 3);
  EXPECT_EQ(stats.max_depth, 3);
  EXPECT_EQ(stats.non_binary_trees, 1);
  EXPECT_EQ(stats.root_labels, (std::array<std::int64_t, 5>{1, 0, 0, 1, 0}));
  EXPECT_EQ(stats.node_labels, (std::array<std::int64_t, 5>{2, 1, 3, 2, 1}));
}

TEST(IoSst, UnescapesPtbTokens) {
  EXPECT_EQ(io::unescape_ptb("-LRB-"), "(");
  EXPECT_EQ(io::unescape_ptb("-RRB-"), ")");
  EXPECT_EQ(io::unescape_ptb("1\\/2"), "1/2");
  EXPECT_EQ(io::unescape_ptb("\\*\\*"), "**");
  EXPECT_EQ(io::unescape_ptb("a\\b"), "a\\b");
  EXPECT_EQ(io::unescape_ptb("``"), "``");
}

TEST(IoSst, ConvertsToAndFromTheJsonInputForm) {
  const io::SstTree tree = io::parse_sst_tree("(3 (2 It) (4 (2 's) (3 good)))");
  const nlohmann::json expected = nlohmann::json::parse(
      R"({"label":3,"children":[{"label":2,"word":"It"},)"
      R"({"label":4,"children":[{"label":2,"word":"'s"},{"label":3,"word":"good"}]}]})");
  EXPECT_EQ(io::to_input(tree), expected);
  EXPECT_EQ(io::sst_tree_from_input(expected), tree);
}

TEST(IoSst, RejectsMalformedJsonInputNamingThePath) {
  auto error = [](const char* text) -> std::string {
    try {
      io::sst_tree_from_input(nlohmann::json::parse(text));
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error(R"({"label":2,"children":[{"label":2,"word":"a"},{"label":9,"word":"b"}]})"),
            "[sst] 'children[1]': expected a label 0..4 but found 9");
  EXPECT_EQ(error(R"({"label":2,"word":"a","children":[]})"),
            "[sst] the value: expected exactly one of \"word\" and \"children\"");
  EXPECT_EQ(error(R"({"label":2,"children":[{"label":1,"children":[3]}]})"),
            "[sst] 'children[0].children[0]': expected an object but found number");
  EXPECT_EQ(error(R"({"word":"a"})"), "[sst] the value: expected an integer \"label\"");
}

// The real files: counts from shared/data/sst/PROVENANCE.md.
struct SplitExpectation {
  const char* file;
  std::int64_t trees, tokens, nodes, longest;
  std::array<std::int64_t, 5> roots;
};

TEST(IoSstData, SplitsMatchProvenance) {
  const SplitExpectation splits[] = {
      {"train.txt", 8544, 163563, 318582, 52, {1092, 2218, 1624, 2322, 1288}},
      {"dev.txt", 1101, 21274, 41447, 49, {139, 289, 229, 279, 165}},
      {"test.txt", 2210, 42405, 82600, 56, {279, 633, 389, 510, 399}},
  };
  for (const SplitExpectation& split : splits) {
    WEFT_REQUIRE_DATA(std::string("sst/") + split.file);
    const auto trees = io::read_sst_file(io_data_path(std::string("sst/") + split.file));
    const io::SstCorpusStats stats = io::corpus_stats(trees);
    EXPECT_EQ(stats.trees, split.trees) << split.file;
    EXPECT_EQ(stats.leaves, split.tokens) << split.file;
    EXPECT_EQ(stats.nodes, split.nodes) << split.file;
    EXPECT_EQ(stats.max_leaves, split.longest) << split.file;
    EXPECT_EQ(stats.root_labels, split.roots) << split.file;
    EXPECT_EQ(stats.non_binary_trees, 0) << split.file;
    // SST-2 keeps the non-neutral roots: 6920 / 872 / 1821.
    EXPECT_EQ(stats.trees - stats.root_labels[2],
              std::int64_t(split.file[0] == 't' && split.file[1] == 'r' ? 6920
                           : split.file[0] == 'd'                       ? 872
                                                                        : 1821))
        << split.file;
  }
}

TEST(IoSstData, NoBreakSpaceTokensSurvive) {
  WEFT_REQUIRE_DATA("sst/train.txt");
  const auto trees = io::read_sst_file(io_data_path("sst/train.txt"));
  std::map<std::string, int> nbsp;
  for (const io::SstTree& tree : trees)
    for (const std::string& word : io::leaf_words(tree))
      if (word.find("\xC2\xA0") != std::string::npos) ++nbsp[word];
  EXPECT_EQ(nbsp, (std::map<std::string, int>{{"2\xC2\xA0"
                                               "1\\/2",
                                               2},
                                              {"8\xC2\xA0"
                                               "1\\/2",
                                               1}}));
}

}  // namespace
}  // namespace weft::testing
