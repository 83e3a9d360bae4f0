// SMILES strings as molecular graphs for graph models: heavy atoms with their chemistry
// (element, degree, charge, aromaticity, hybridization, hydrogens, ring membership) and bonds
// (type, conjugation, ring membership), plus fixed-size feature tensors built from them.
// Parsing uses RDKit when Weft is built with it (WEFT_WITH_RDKIT); without it parse_smiles
// throws a clear error and smiles_parser_available() is false. The features need no RDKit.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "weft/core/export.h"
#include "weft/tensor/tensor.h"

WEFT_API_BEGIN
namespace weft::io {

enum class Hybridization { kOther, kS, kSP, kSP2, kSP3, kSP3D, kSP3D2 };
enum class BondType { kSingle, kDouble, kTriple, kAromatic, kOther };

struct AtomInfo {
  int atomic_number = 0;
  std::string symbol;  // "C", "Cl", ...
  int degree = 0;      // explicit bonds to other heavy atoms
  int formal_charge = 0;
  bool aromatic = false;
  Hybridization hybridization = Hybridization::kOther;
  int hydrogens = 0;  // total attached hydrogens, implicit and explicit
  bool in_ring = false;
};

struct BondInfo {
  std::int32_t begin = 0, end = 0;  // atom indices; each bond is listed once
  BondType type = BondType::kSingle;
  bool conjugated = false;
  bool in_ring = false;
};

struct MoleculeGraph {
  std::string smiles;
  std::vector<AtomInfo> atoms;
  std::vector<BondInfo> bonds;
};

// True when this build can parse SMILES (it was built with RDKit).
bool smiles_parser_available();

// Parses and sanitizes `smiles` (hydrogens stay implicit: atoms are the heavy atoms). Throws
// weft::Error "[smiles] cannot parse 'C1CC': <RDKit's reason>" for invalid SMILES, and
// "[smiles] ... built without RDKit ..." when smiles_parser_available() is false.
MoleculeGraph parse_smiles(std::string_view smiles);

// Feature layout (one-hot groups, in this order):
//   element  C N O S F Cl Br I P B Si Se, other          13
//   degree   0 1 2 3 4, 5 or more                         6
//   charge   -1 0 +1, other                               4
//   aromatic                                              1
//   hybrid.  SP SP2 SP3 SP3D SP3D2, other                 6
//   H count  0 1 2 3, 4 or more                           5
//   in ring                                               1
inline constexpr std::int64_t kAtomFeatureSize = 36;
//   bond     single double triple aromatic                4 (all zero for other types)
//   conjugated, in ring                                   2
inline constexpr std::int64_t kBondFeatureSize = 6;

// Names of the feature columns, e.g. "element=Cl", "degree>=5", "aromatic".
const std::vector<std::string>& atom_feature_names();
const std::vector<std::string>& bond_feature_names();

Tensor atom_features(const MoleculeGraph& graph);  // float32 [atoms, kAtomFeatureSize]
Tensor bond_features(const MoleculeGraph& graph);  // float32 [bonds, kBondFeatureSize]
Tensor bond_index(const MoleculeGraph& graph);     // int32 [bonds, 2]: begin, end

}  // namespace weft::io
WEFT_API_END
