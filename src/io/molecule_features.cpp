// Fixed-size atom and bond feature vectors from a MoleculeGraph (layout in
// weft/io/molecule_graph.h). Independent of RDKit, so graphs built by hand get the same
// features as parsed ones.
#include <algorithm>
#include <array>

#include "weft/io/molecule_graph.h"

namespace weft::io {
namespace {

constexpr std::array<const char*, 12> kElements = {"C",  "N", "O", "S", "F",  "Cl",
                                                   "Br", "I", "P", "B", "Si", "Se"};
constexpr std::array<Hybridization, 5> kHybridizations = {Hybridization::kSP, Hybridization::kSP2,
                                                          Hybridization::kSP3, Hybridization::kSP3D,
                                                          Hybridization::kSP3D2};
constexpr std::array<const char*, 5> kHybridizationNames = {"SP", "SP2", "SP3", "SP3D", "SP3D2"};

std::vector<std::string> make_atom_names() {
  std::vector<std::string> names;
  for (const char* e : kElements) names.push_back(std::string("element=") + e);
  names.push_back("element=other");
  for (int d = 0; d < 5; ++d) names.push_back("degree=" + std::to_string(d));
  names.push_back("degree>=5");
  for (const char* c : {"charge=-1", "charge=0", "charge=+1", "charge=other"}) names.push_back(c);
  names.push_back("aromatic");
  for (const char* h : kHybridizationNames) names.push_back(std::string("hybridization=") + h);
  names.push_back("hybridization=other");
  for (int h = 0; h < 4; ++h) names.push_back("hydrogens=" + std::to_string(h));
  names.push_back("hydrogens>=4");
  names.push_back("in_ring");
  return names;
}

void atom_row(const AtomInfo& atom, float* row) {
  std::size_t at = 0;
  const auto element = std::find_if(kElements.begin(), kElements.end(),
                                    [&](const char* e) { return atom.symbol == e; });
  row[at + std::size_t(element - kElements.begin())] = 1;
  at += kElements.size() + 1;
  row[at + std::size_t(std::clamp(atom.degree, 0, 5))] = 1;
  at += 6;
  row[at + (atom.formal_charge >= -1 && atom.formal_charge <= 1
                ? std::size_t(atom.formal_charge + 1)
                : 3)] = 1;
  at += 4;
  row[at++] = atom.aromatic ? 1 : 0;
  const auto hybrid = std::find(kHybridizations.begin(), kHybridizations.end(), atom.hybridization);
  row[at + std::size_t(hybrid - kHybridizations.begin())] = 1;
  at += kHybridizations.size() + 1;
  row[at + std::size_t(std::clamp(atom.hydrogens, 0, 4))] = 1;
  at += 5;
  row[at] = atom.in_ring ? 1 : 0;
}

}  // namespace

const std::vector<std::string>& atom_feature_names() {
  static const std::vector<std::string> names = make_atom_names();
  return names;
}

const std::vector<std::string>& bond_feature_names() {
  static const std::vector<std::string> names = {"type=single",   "type=double", "type=triple",
                                                 "type=aromatic", "conjugated",  "in_ring"};
  return names;
}

Tensor atom_features(const MoleculeGraph& graph) {
  const auto atoms = std::int64_t(graph.atoms.size());
  std::vector<float> values(std::size_t(atoms * kAtomFeatureSize), 0.0f);
  for (std::size_t i = 0; i < graph.atoms.size(); ++i)
    atom_row(graph.atoms[i], values.data() + i * std::size_t(kAtomFeatureSize));
  return Tensor::from_vector(Shape{atoms, kAtomFeatureSize}, values);
}

Tensor bond_features(const MoleculeGraph& graph) {
  const auto bonds = std::int64_t(graph.bonds.size());
  std::vector<float> values(std::size_t(bonds * kBondFeatureSize), 0.0f);
  for (std::size_t i = 0; i < graph.bonds.size(); ++i) {
    float* row = values.data() + i * std::size_t(kBondFeatureSize);
    const BondInfo& bond = graph.bonds[i];
    if (bond.type != BondType::kOther) row[std::size_t(bond.type)] = 1;
    row[4] = bond.conjugated ? 1 : 0;
    row[5] = bond.in_ring ? 1 : 0;
  }
  return Tensor::from_vector(Shape{bonds, kBondFeatureSize}, values);
}

Tensor bond_index(const MoleculeGraph& graph) {
  std::vector<std::int32_t> values;
  values.reserve(graph.bonds.size() * 2);
  for (const BondInfo& bond : graph.bonds) {
    values.push_back(bond.begin);
    values.push_back(bond.end);
  }
  return Tensor::from_vector(Shape{std::int64_t(graph.bonds.size()), 2}, values);
}

}  // namespace weft::io
