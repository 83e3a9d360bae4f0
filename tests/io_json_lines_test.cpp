// JSON lines: values read in order with blank lines skipped, malformed lines reported with
// file:line:column and the parser's message, streaming, and writing one compact line.
#include "weft/io/json_lines.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "io_test_util.h"
#include "weft/core/error.h"

namespace weft::testing {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

std::string read_error(const std::string& text) {
  std::istringstream in(text);
  try {
    io::read_json_lines(in, "in.jsonl");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(IoJsonLines, ReadsValuesSkippingBlankLines) {
  std::istringstream in("{\"label\": 3, \"word\": \"good\"}\n\n  \r\n[1, 2]\r\n\"caf\u00e9\"\n7");
  const std::vector<Json> values = io::read_json_lines(in);
  ASSERT_EQ(values.size(), 4u);
  EXPECT_EQ(values[0]["label"], 3);
  EXPECT_EQ(values[0]["word"], "good");
  EXPECT_EQ(values[1], Json::array({1, 2}));
  EXPECT_EQ(values[2], "caf\u00e9");
  EXPECT_EQ(values[3], 7);
}

TEST(IoJsonLines, ReportsFileLineColumnAndTheParserMessage) {
  EXPECT_EQ(read_error("{}\n{\"a\": tru}\n"),
            "[json_lines] in.jsonl:2:10: syntax error while parsing value - invalid literal; "
            "last read: '\"a\": tru}'");
  EXPECT_THAT(read_error("1\n\n[1, 2\n"), HasSubstr("[json_lines] in.jsonl:3:"));
  EXPECT_THAT(read_error("1\n\n[1, 2\n"), HasSubstr("expected ']'"));
  // Two values on one line are not one JSON value.
  EXPECT_THAT(read_error("{} {}\n"), HasSubstr("in.jsonl:1:4: syntax error while parsing value"));
}

TEST(IoJsonLines, StreamsWithLineNumbers) {
  std::istringstream in("1\n\n2\n3\n");
  std::vector<std::pair<int, std::int64_t>> seen;
  io::for_each_json_line(
      in, "s", [&](Json&& value, std::int64_t line) { seen.emplace_back(value.get<int>(), line); });
  EXPECT_EQ(seen, (std::vector<std::pair<int, std::int64_t>>{{1, 1}, {2, 3}, {3, 4}}));
}

TEST(IoJsonLines, WritesOneCompactLineAndReadsItBack) {
  std::ostringstream out;
  const Json value = {{"label", 2}, {"children", {{{"label", 1}, {"word", "a\nb \u00e9"}}}}};
  io::write_json_line(out, value);
  io::write_json_line(out, 5);
  EXPECT_EQ(out.str(), "{\"children\":[{\"label\":1,\"word\":\"a\\nb \u00e9\"}],\"label\":2}\n5\n");
  std::istringstream in(out.str());
  EXPECT_EQ(io::read_json_lines(in), (std::vector<Json>{value, 5}));
  std::ostringstream bad;
  EXPECT_THAT([&] { io::write_json_line(bad, Json("\xff")); },
              ::testing::ThrowsMessage<Error>(HasSubstr("[json_lines] cannot write a value: ")));
}

using IoJsonLinesFile = IoTempDir;

TEST_F(IoJsonLinesFile, ReadsFilesAndNamesThem) {
  const std::string path = write_file("x.jsonl", "{\"a\":1}\n{\"a\":\n");
  EXPECT_THAT([&] { io::read_json_lines_file(path); },
              ::testing::ThrowsMessage<Error>(HasSubstr("[json_lines] " + path + ":2:")));
  EXPECT_EQ(io::read_json_lines_file(write_file("y.jsonl", "{\"a\":1}\n")).size(), 1u);
  EXPECT_THAT([&] { io::read_json_lines_file((dir_ / "absent").string()); },
              ::testing::ThrowsMessage<Error>(HasSubstr("[json_lines] cannot open '")));
}

}  // namespace
}  // namespace weft::testing
