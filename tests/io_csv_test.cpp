// The CSV reader: quoting (doubled quotes, delimiters and newlines inside quotes), CRLF,
// blank lines, row line numbers, and errors with file:line:column.
#include "weft/io/csv.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "io_test_util.h"
#include "weft/core/error.h"

namespace weft::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Fields = std::vector<std::string>;

TEST(IoCsv, ReadsQuotedFieldsAndKeepsLineNumbers) {
  const io::CsvTable table = io::parse_csv(
      "name,smiles,value\r\n"
      "\"4-methoxy-N,N-dimethyl\",CN(C)C,-11.01\r\n"
      "\r\n"
      "\"say \"\"hi\"\"\",\"two\nlines\",\n"
      "plain\"quote,x,3");
  EXPECT_EQ(table.header, (Fields{"name", "smiles", "value"}));
  ASSERT_EQ(table.rows.size(), 3u);
  EXPECT_EQ(table.rows[0].fields, (Fields{"4-methoxy-N,N-dimethyl", "CN(C)C", "-11.01"}));
  EXPECT_EQ(table.rows[0].line, 2);
  EXPECT_EQ(table.rows[1].fields, (Fields{"say \"hi\"", "two\nlines", ""}));
  EXPECT_EQ(table.rows[1].line, 4);
  EXPECT_EQ(table.rows[2].fields, (Fields{"plain\"quote", "x", "3"}));
  EXPECT_EQ(table.rows[2].line, 6);
  EXPECT_EQ(table.column("value"), 2u);
  EXPECT_THAT([&] { table.column("expt"); },
              ThrowsMessage<Error>(HasSubstr(
                  "[csv] <string>: no column 'expt' (columns: 'name', 'smiles', 'value')")));
}

TEST(IoCsv, OtherDelimitersAndNoHeader) {
  const io::CsvTable table = io::parse_csv("a\tb\n\"c\td\"\te\n", "t", {'\t', false});
  EXPECT_TRUE(table.header.empty());
  ASSERT_EQ(table.rows.size(), 2u);
  EXPECT_EQ(table.rows[1].fields, (Fields{"c\td", "e"}));
}

TEST(IoCsv, RejectsUnclosedQuotesAndTextAfterAClosingQuote) {
  EXPECT_THAT([] { io::parse_csv("a,b\n1,\"open\n2,3\n", "f.csv"); },
              ThrowsMessage<Error>(
                  "[csv] f.csv:2:3: expected a closing '\"' for the field opened here but found "
                  "end of file"));
  EXPECT_THAT(
      [] { io::parse_csv("a,b\n1,\"x\"y\n", "f.csv"); },
      ThrowsMessage<Error>(
          "[csv] f.csv:2:6: expected ',' or end of line after a closing quote but found 'y'"));
}

using IoCsvFile = IoTempDir;

TEST_F(IoCsvFile, ReadsAFileAndNamesMissingOnes) {
  const std::string path = write_file("m.csv", "\xEF\xBB\xBFx,y\n1,2\n");
  const io::CsvTable table = io::read_csv_file(path);
  EXPECT_EQ(table.header, (Fields{"x", "y"}));
  EXPECT_EQ(table.source, path);
  EXPECT_THAT([&] { io::read_csv_file((dir_ / "absent.csv").string()); },
              ThrowsMessage<Error>(HasSubstr("[csv] cannot open '")));
}

}  // namespace
}  // namespace weft::testing
