// CSV tables (io::parse_csv), the MoleculeNet files' container, with and without a header.
#include "weft/io/csv.h"
#include "fuzz_target.h"

using namespace weft;

WEFT_FUZZ_TARGET(csv) {
  const bool header = !input.empty() && (input[0] & 1);
  const io::CsvTable table = io::parse_csv(input, "fuzz", {.has_header = header});
  for (const io::CsvRow& row : table.rows) (void)row.fields.size();
}
