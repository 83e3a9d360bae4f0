// MoleculeNet-style property data sets as records of (SMILES, targets, missing-label mask):
// ESOL (delaney-processed.csv, one regression target), Tox21 (tox21.csv, 12 binary tasks
// with missing labels) and FreeSolv (SAMPL.csv, hydration free energy). Rows that cannot be
// used are rejected with "[molecules] file:line: ..." or skipped and listed, per option.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/core/export.h"
#include "weft/io/csv.h"

WEFT_API_BEGIN
namespace weft::io {

struct MoleculeRecord {
  std::string id;                     // compound name or id column ("" when the file has none)
  std::string smiles;                 // trimmed of surrounding spaces
  std::vector<float> targets;         // one per task; 0 where missing
  std::vector<std::uint8_t> present;  // one per task; 0 where the label is missing
  std::int64_t line = 0;              // where the row starts in the file
};

struct MoleculeDataset {
  std::string name;                // "esol", "tox21", "freesolv", or the caller's
  std::vector<std::string> tasks;  // target column names
  std::vector<MoleculeRecord> records;
  std::vector<std::string> skipped;  // "file:line: why", for rows left out under kSkip
  std::int64_t trimmed_smiles = 0;   // SMILES that had surrounding spaces removed

  // Number of distinct SMILES strings (the files repeat some molecules).
  std::int64_t unique_smiles() const;
  // Records with a label for task `t`, and those of them equal to 1 (binary tasks).
  std::int64_t labelled(std::size_t task) const;
  std::int64_t positives(std::size_t task) const;
};

// How to read one CSV into records.
struct MoleculeCsvSpec {
  std::string name;
  std::string smiles_column;
  std::vector<std::string> target_columns;
  std::string id_column;       // "" for none
  bool allow_missing = false;  // an empty target cell is a missing label (else a bad row)
  bool binary = false;         // targets must be 0 or 1
};

struct MoleculeOptions {
  OnBadRow bad_rows = OnBadRow::kReject;
};

// A bad row: wrong number of fields, an empty SMILES, a target that is not a number (or not
// 0/1 for a binary task), or a missing target where none may be missing.
MoleculeDataset read_molecule_csv(const std::string& path, const MoleculeCsvSpec& spec,
                                  const MoleculeOptions& options = {});

// The three MoleculeNet files, with their columns (see shared/data/molecules/PROVENANCE.md).
MoleculeDataset read_esol(const std::string& path, const MoleculeOptions& options = {});
MoleculeDataset read_tox21(const std::string& path, const MoleculeOptions& options = {});
MoleculeDataset read_freesolv(const std::string& path, const MoleculeOptions& options = {});

}  // namespace weft::io
WEFT_API_END
