// A small RFC 4180 CSV reader for the data sets (MoleculeNet files): quoted fields with
// doubled quotes and embedded delimiters or newlines, CRLF or LF, blank lines skipped. Each
// row keeps the line it starts on, so readers built on it report "file:line: ...".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft::io {

// What a reader does with a row it cannot use: throw, or leave it out and report it.
enum class OnBadRow { kReject, kSkip };

struct CsvRow {
  std::int64_t line = 0;  // 1-based line the row starts on
  std::vector<std::string> fields;
};

struct CsvTable {
  std::string source;               // the file name (or the name given), for messages
  std::vector<std::string> header;  // empty when read without a header
  std::vector<CsvRow> rows;

  // The index of the header column `name`; throws "[csv] file: no column 'x' (columns: ...)".
  std::size_t column(std::string_view name) const;
};

struct CsvOptions {
  char delimiter = ',';
  bool has_header = true;  // the first row names the columns
};

// Throws weft::Error "[csv] file:line:column: ..." for a quote left open at the end of the
// file or text after a closing quote; a quote inside an unquoted field is kept as text.
CsvTable read_csv_file(const std::string& path, const CsvOptions& options = {});
CsvTable parse_csv(std::string_view text, std::string_view name = "<string>",
                   const CsvOptions& options = {});

}  // namespace weft::io
WEFT_API_END
