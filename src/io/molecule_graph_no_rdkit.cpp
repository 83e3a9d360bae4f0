// parse_smiles in a build without RDKit: a clear error saying how to get it.
#include "weft/core/error.h"
#include "weft/io/molecule_graph.h"

namespace weft::io {

bool smiles_parser_available() { return false; }

MoleculeGraph parse_smiles(std::string_view smiles) {
  fail("smiles", "cannot parse '", smiles,
       "': Weft was built without RDKit; install librdkit-dev and libboost-dev "
       "(scripts/install_deps.sh) and configure with -DWEFT_WITH_RDKIT=AUTO or ON");
}

}  // namespace weft::io
