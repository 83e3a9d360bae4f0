// MoleculeNet rows (io::read_esol over a CSV file, bad rows skipped as `--bad-records skip`
// does) and each row's SMILES through io::parse_smiles, as the molecules model encodes them.
#include "fuzz_target.h"
#include "weft/core/error.h"
#include "weft/io/molecule_graph.h"
#include "weft/io/molecules.h"

using namespace weft;

WEFT_FUZZ_TARGET(molecule_csv) {
  const fuzz::MemoryFile file(input);
  const io::MoleculeDataset data = io::read_esol(file.path(), {.bad_rows = io::OnBadRow::kSkip});
  if (!io::smiles_parser_available()) return;
  for (const io::MoleculeRecord& record : data.records) {
    try {
      (void)io::parse_smiles(record.smiles);
    } catch (const Error&) {
    }
  }
}
