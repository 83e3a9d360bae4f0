// SMILES strings (io::parse_smiles through RDKit), the line `weft infer molecules` reads.
#include "fuzz_target.h"
#include "weft/io/molecule_graph.h"

using namespace weft;

WEFT_FUZZ_TARGET(smiles) {
  if (!io::smiles_parser_available()) return;
  const io::MoleculeGraph graph = io::parse_smiles(input);
  (void)graph.bonds.size();
}
