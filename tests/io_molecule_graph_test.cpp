// SMILES to molecular graphs: atom and bond counts and chemistry of known molecules, the
// feature layout, clear errors for invalid SMILES, and every ESOL / Tox21 molecule parsed
// with the atom and bond totals of PROVENANCE. Parsing tests skip in builds without RDKit.
#include "weft/io/molecule_graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "io_test_util.h"
#include "weft/core/error.h"
#include "weft/io/molecules.h"

namespace weft::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

#define WEFT_REQUIRE_RDKIT()                                                               \
  do {                                                                                     \
    if (!io::smiles_parser_available())                                                    \
      GTEST_SKIP() << "built without RDKit (WEFT_WITH_RDKIT); SMILES parsing unavailable"; \
  } while (0)

std::vector<float> row(const Tensor& t, std::int64_t r) {
  const std::vector<float> all = t.to_float_vector();
  const std::size_t n = std::size_t(t.row_size());
  return {all.begin() + std::ptrdiff_t(std::size_t(r) * n),
          all.begin() + std::ptrdiff_t(std::size_t(r + 1) * n)};
}

std::vector<std::string> active(const std::vector<float>& values,
                                const std::vector<std::string>& names) {
  std::vector<std::string> on;
  for (std::size_t i = 0; i < values.size(); ++i)
    if (values[i] != 0) on.push_back(names[i]);
  return on;
}

TEST(IoMoleculeGraph, FeatureNamesMatchTheSizes) {
  EXPECT_EQ(std::int64_t(io::atom_feature_names().size()), io::kAtomFeatureSize);
  EXPECT_EQ(std::int64_t(io::bond_feature_names().size()), io::kBondFeatureSize);
}

TEST(IoMoleculeGraph, FeaturesOfAHandBuiltGraph) {
  io::MoleculeGraph g;
  g.atoms.push_back(
      {.atomic_number = 17, .symbol = "Cl", .degree = 1, .hybridization = io::Hybridization::kSP3});
  g.atoms.push_back(
      {.atomic_number = 29, .symbol = "Cu", .degree = 7, .formal_charge = 2, .hydrogens = 6});
  g.bonds.push_back({.begin = 0, .end = 1, .type = io::BondType::kOther, .in_ring = true});
  EXPECT_EQ(active(row(io::atom_features(g), 0), io::atom_feature_names()),
            (std::vector<std::string>{"element=Cl", "degree=1", "charge=0", "hybridization=SP3",
                                      "hydrogens=0"}));
  EXPECT_EQ(active(row(io::atom_features(g), 1), io::atom_feature_names()),
            (std::vector<std::string>{"element=other", "degree>=5", "charge=other",
                                      "hybridization=other", "hydrogens>=4"}));
  EXPECT_EQ(active(row(io::bond_features(g), 0), io::bond_feature_names()),
            (std::vector<std::string>{"in_ring"}));
  EXPECT_EQ(io::bond_index(g).to_int_vector(), (std::vector<std::int32_t>{0, 1}));
}

TEST(IoMoleculeGraph, Ethanol) {
  WEFT_REQUIRE_RDKIT();
  const io::MoleculeGraph g = io::parse_smiles("CCO");
  ASSERT_EQ(g.atoms.size(), 3u);
  ASSERT_EQ(g.bonds.size(), 2u);
  EXPECT_EQ(g.atoms[2].symbol, "O");
  EXPECT_EQ(g.atoms[2].hydrogens, 1);
  EXPECT_EQ(g.atoms[0].hydrogens, 3);
  EXPECT_EQ(g.atoms[1].degree, 2);
  EXPECT_EQ(g.atoms[1].hybridization, io::Hybridization::kSP3);
  EXPECT_EQ(g.bonds[1].begin, 1);
  EXPECT_EQ(g.bonds[1].end, 2);
  EXPECT_EQ(g.bonds[1].type, io::BondType::kSingle);
  EXPECT_EQ(active(row(io::atom_features(g), 1), io::atom_feature_names()),
            (std::vector<std::string>{"element=C", "degree=2", "charge=0", "hybridization=SP3",
                                      "hydrogens=2"}));
  EXPECT_EQ(io::atom_features(g).shape(), (Shape{3, io::kAtomFeatureSize}));
  EXPECT_EQ(io::bond_index(g).to_int_vector(), (std::vector<std::int32_t>{0, 1, 1, 2}));
}

TEST(IoMoleculeGraph, BenzeneIsAromatic) {
  WEFT_REQUIRE_RDKIT();
  const io::MoleculeGraph g = io::parse_smiles("c1ccccc1");
  ASSERT_EQ(g.atoms.size(), 6u);
  ASSERT_EQ(g.bonds.size(), 6u);
  for (const io::BondInfo& b : g.bonds) {
    EXPECT_EQ(b.type, io::BondType::kAromatic);
    EXPECT_TRUE(b.conjugated);
    EXPECT_TRUE(b.in_ring);
  }
  EXPECT_EQ(active(row(io::atom_features(g), 0), io::atom_feature_names()),
            (std::vector<std::string>{"element=C", "degree=2", "charge=0", "aromatic",
                                      "hybridization=SP2", "hydrogens=1", "in_ring"}));
  EXPECT_EQ(active(row(io::bond_features(g), 0), io::bond_feature_names()),
            (std::vector<std::string>{"type=aromatic", "conjugated", "in_ring"}));
}

TEST(IoMoleculeGraph, ChargesAndTripleBonds) {
  WEFT_REQUIRE_RDKIT();
  const io::MoleculeGraph acetate = io::parse_smiles("CC(=O)[O-]");
  EXPECT_EQ(acetate.atoms[3].formal_charge, -1);
  EXPECT_EQ(acetate.bonds[1].type, io::BondType::kDouble);
  const io::MoleculeGraph hcn = io::parse_smiles("C#N");
  EXPECT_EQ(hcn.bonds[0].type, io::BondType::kTriple);
  EXPECT_EQ(hcn.atoms[0].hybridization, io::Hybridization::kSP);
}

TEST(IoMoleculeGraph, InvalidSmilesGivesAClearError) {
  WEFT_REQUIRE_RDKIT();
  // RDKit's reason comes from its error log; its wording may change between versions.
  EXPECT_THAT([] { io::parse_smiles("C1CC"); },
              ::testing::ThrowsMessage<Error>(StartsWith("[smiles] cannot parse 'C1CC': ")));
  EXPECT_THAT([] { io::parse_smiles("C(C"); },
              ::testing::ThrowsMessage<Error>(StartsWith("[smiles] cannot parse 'C(C': ")));
  EXPECT_THAT([] { io::parse_smiles("Xy"); },
              ::testing::ThrowsMessage<Error>(StartsWith("[smiles] cannot parse 'Xy': ")));
  // Valence and aromaticity errors are found by sanitization, not by the parser.
  EXPECT_THAT([] { io::parse_smiles("C(C)(C)(C)(C)C"); },
              ::testing::ThrowsMessage<Error>(
                  "[smiles] cannot parse 'C(C)(C)(C)(C)C': Explicit valence for atom # 0 C, 5, "
                  "is greater than permitted"));
  EXPECT_THAT([] { io::parse_smiles("c1cccc1"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("kekulize")));
  EXPECT_THAT([] { io::parse_smiles(""); },
              ::testing::ThrowsMessage<Error>("[smiles] cannot parse an empty SMILES string"));
}

TEST(IoMoleculeGraph, WithoutRdkitParsingExplainsWhy) {
  if (io::smiles_parser_available()) GTEST_SKIP() << "built with RDKit";
  EXPECT_THAT([] { io::parse_smiles("CCO"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("built without RDKit")));
}

TEST(IoMoleculeGraphData, EveryEsolAndTox21MoleculeParses) {
  WEFT_REQUIRE_RDKIT();
  struct Expected {
    const char* file;
    std::int64_t atoms, bonds;
  };
  for (const Expected& e : {Expected{"molecules/delaney-processed.csv", 14991, 15428},
                            Expected{"molecules/tox21.csv", 148350, 154110}}) {
    WEFT_REQUIRE_DATA(e.file);
    const std::string path = io_data_path(e.file);
    const io::MoleculeDataset d = std::string(e.file).find("tox21") != std::string::npos
                                      ? io::read_tox21(path)
                                      : io::read_esol(path);
    std::int64_t atoms = 0, bonds = 0;
    for (const io::MoleculeRecord& r : d.records) {
      const io::MoleculeGraph g = io::parse_smiles(r.smiles);
      atoms += std::int64_t(g.atoms.size());
      bonds += std::int64_t(g.bonds.size());
    }
    EXPECT_EQ(atoms, e.atoms) << e.file;
    EXPECT_EQ(bonds, e.bonds) << e.file;
  }
}

}  // namespace
}  // namespace weft::testing
