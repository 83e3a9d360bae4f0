// MoleculeNet CSV readers: targets and missing-label masks, trimmed SMILES, bad rows rejected
// or skipped with file:line, and the real ESOL / Tox21 / FreeSolv counts from PROVENANCE.
#include "weft/io/molecules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "io_test_util.h"
#include "weft/core/error.h"

namespace weft::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

class IoMolecules : public IoTempDir {
 protected:
  io::MoleculeCsvSpec binary_spec() const {
    return {.name = "toy",
            .smiles_column = "smiles",
            .target_columns = {"a", "b"},
            .id_column = "id",
            .allow_missing = true,
            .binary = true};
  }
};

TEST_F(IoMolecules, ReadsTargetsWithMissingLabels) {
  const std::string path = write_file("t.csv", "a,b,id,smiles\n1,,m1,CCO \n0,1,m2,\"c1ccccc1\"\n");
  const io::MoleculeDataset d = io::read_molecule_csv(path, binary_spec());
  ASSERT_EQ(d.records.size(), 2u);
  EXPECT_EQ(d.records[0].smiles, "CCO");
  EXPECT_EQ(d.records[0].id, "m1");
  EXPECT_EQ(d.records[0].targets, (std::vector<float>{1, 0}));
  EXPECT_EQ(d.records[0].present, (std::vector<std::uint8_t>{1, 0}));
  EXPECT_EQ(d.records[1].present, (std::vector<std::uint8_t>{1, 1}));
  EXPECT_EQ(d.records[1].line, 3);
  EXPECT_EQ(d.trimmed_smiles, 1);
  EXPECT_EQ(d.labelled(1), 1);
  EXPECT_EQ(d.positives(0), 1);
  EXPECT_EQ(d.unique_smiles(), 2);
}

TEST_F(IoMolecules, RejectsOrSkipsBadRowsNamingFileAndLine) {
  const std::string path = write_file("t.csv",
                                      "a,b,id,smiles\n"
                                      "1,0,m1,CCO\n"
                                      "2,0,m2,CC\n"
                                      "1,x,m3,CN\n"
                                      "1,0,m4\n"
                                      "1,0,m5,  \n"
                                      "0,0,m6,O\n");
  EXPECT_THAT(
      [&] { io::read_molecule_csv(path, binary_spec()); },
      ThrowsMessage<Error>("[molecules] " + path + ":3: expected 0 or 1 for 'a' but found '2'"));
  const io::MoleculeDataset d =
      io::read_molecule_csv(path, binary_spec(), {.bad_rows = io::OnBadRow::kSkip});
  ASSERT_EQ(d.records.size(), 2u);
  EXPECT_EQ(d.records[1].id, "m6");
  EXPECT_EQ(d.skipped, (std::vector<std::string>{
                           path + ":3: expected 0 or 1 for 'a' but found '2'",
                           path + ":4: expected a number for 'b' but found 'x'",
                           path + ":5: expected 4 fields (as in the header) but found 3",
                           path + ":6: expected a SMILES string in column 'smiles'",
                       }));
  io::MoleculeCsvSpec strict = binary_spec();
  strict.allow_missing = false;
  EXPECT_THAT(
      [&] { io::read_molecule_csv(write_file("m.csv", "a,b,id,smiles\n1,,m,C\n"), strict); },
      ThrowsMessage<Error>(HasSubstr("m.csv:2: expected a value for 'b' but the cell is empty")));
  strict.target_columns = {"expt"};
  EXPECT_THAT(
      [&] { io::read_molecule_csv(path, strict); },
      ThrowsMessage<Error>(HasSubstr("no column 'expt' (columns: 'a', 'b', 'id', 'smiles')")));
}

TEST(IoMoleculesData, EsolMatchesProvenance) {
  WEFT_REQUIRE_DATA("molecules/delaney-processed.csv");
  const io::MoleculeDataset d = io::read_esol(io_data_path("molecules/delaney-processed.csv"));
  EXPECT_EQ(d.records.size(), 1128u);
  EXPECT_EQ(d.trimmed_smiles, 212);
  EXPECT_EQ(d.unique_smiles(), 1123);
  EXPECT_EQ(d.records[0].id, "Amigdalin");
  EXPECT_EQ(d.records[0].targets, (std::vector<float>{-0.77f}));
  EXPECT_EQ(d.records[0].smiles, "OCC3OC(OCC2OC(OC(C#N)c1ccccc1)C(O)C(O)C2O)C(O)C(O)C3O");
}

TEST(IoMoleculesData, Tox21MatchesProvenance) {
  WEFT_REQUIRE_DATA("molecules/tox21.csv");
  const io::MoleculeDataset d = io::read_tox21(io_data_path("molecules/tox21.csv"));
  EXPECT_EQ(d.records.size(), 8014u);
  EXPECT_EQ(d.unique_smiles(), 7831);
  ASSERT_EQ(d.tasks.size(), 12u);
  EXPECT_EQ(d.tasks[0], "NR-AR");
  EXPECT_EQ(d.positives(0), 310);
  EXPECT_EQ(d.labelled(0), 8014 - 575);
  EXPECT_EQ(d.tasks[7], "SR-ARE");
  EXPECT_EQ(d.positives(7), 961);
  EXPECT_EQ(d.labelled(7), 8014 - 2079);
  EXPECT_EQ(d.records[0].id, "TOX3021");
}

TEST(IoMoleculesData, FreeSolvMatchesProvenance) {
  WEFT_REQUIRE_DATA("molecules/SAMPL.csv");
  const io::MoleculeDataset d = io::read_freesolv(io_data_path("molecules/SAMPL.csv"));
  EXPECT_EQ(d.records.size(), 643u);
  EXPECT_EQ(d.unique_smiles(), 642);
  EXPECT_EQ(d.records[0].id, "4-methoxy-N,N-dimethyl-benzamide");
  EXPECT_EQ(d.records[0].smiles, "CN(C)C(=O)c1ccc(cc1)OC");
  EXPECT_EQ(d.records[0].targets, (std::vector<float>{-11.01f}));
}

}  // namespace
}  // namespace weft::testing
