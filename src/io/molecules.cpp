// MoleculeNet CSVs to molecule records (see weft/io/molecules.h): columns are looked up by
// name in the header, every row is validated, and a bad row is rejected or skipped with its
// file and line.
#include "weft/io/molecules.h"

#include <charconv>
#include <cmath>
#include <unordered_set>

#include "text_input.h"
#include "weft/core/error.h"

namespace weft::io {
namespace {

struct Columns {
  std::size_t smiles = 0;
  std::vector<std::size_t> targets;
  std::size_t id = 0;
  bool has_id = false;
};

Columns find_columns(const CsvTable& table, const MoleculeCsvSpec& spec) {
  Columns columns;
  columns.smiles = table.column(spec.smiles_column);
  for (const std::string& name : spec.target_columns) columns.targets.push_back(table.column(name));
  if (!spec.id_column.empty()) {
    columns.id = table.column(spec.id_column);
    columns.has_id = true;
  }
  return columns;
}

// Why `row` cannot be used ("" when it can); fills `record` as it goes.
std::string convert_row(const CsvRow& row, const CsvTable& table, const Columns& columns,
                        const MoleculeCsvSpec& spec, MoleculeRecord& record, bool& trimmed) {
  if (row.fields.size() != table.header.size())
    return weft::detail::concat_message("expected ", table.header.size(),
                                        " fields (as in the header) but found ", row.fields.size());
  const std::string& raw = row.fields[columns.smiles];
  const std::string_view smiles = detail::trim_blanks(raw);
  if (smiles.empty()) return "expected a SMILES string in column '" + spec.smiles_column + "'";
  trimmed = smiles.size() != raw.size();
  record.smiles = std::string(smiles);
  record.id = columns.has_id ? row.fields[columns.id] : "";
  record.line = row.line;
  record.targets.assign(columns.targets.size(), 0.0f);
  record.present.assign(columns.targets.size(), 0);
  for (std::size_t t = 0; t < columns.targets.size(); ++t) {
    const std::string_view cell = detail::trim_blanks(row.fields[columns.targets[t]]);
    const std::string& task = spec.target_columns[t];
    if (cell.empty()) {
      if (spec.allow_missing) continue;
      return "expected a value for '" + task + "' but the cell is empty";
    }
    float value = 0;
    const auto [ptr, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), value);
    if (ec != std::errc() || ptr != cell.data() + cell.size() || !std::isfinite(value))
      return "expected a number for '" + task + "' but found " + detail::quoted(cell);
    if (spec.binary && value != 0.0f && value != 1.0f)
      return "expected 0 or 1 for '" + task + "' but found " + detail::quoted(cell);
    record.targets[t] = value;
    record.present[t] = 1;
  }
  return "";
}

}  // namespace

std::int64_t MoleculeDataset::unique_smiles() const {
  std::unordered_set<std::string> seen;
  for (const MoleculeRecord& r : records) seen.insert(r.smiles);
  return std::int64_t(seen.size());
}

std::int64_t MoleculeDataset::labelled(std::size_t task) const {
  std::int64_t n = 0;
  for (const MoleculeRecord& r : records) n += r.present.at(task);
  return n;
}

std::int64_t MoleculeDataset::positives(std::size_t task) const {
  std::int64_t n = 0;
  for (const MoleculeRecord& r : records) n += r.present.at(task) && r.targets[task] == 1.0f;
  return n;
}

MoleculeDataset read_molecule_csv(const std::string& path, const MoleculeCsvSpec& spec,
                                  const MoleculeOptions& options) {
  const CsvTable table = read_csv_file(path);
  const Columns columns = find_columns(table, spec);
  MoleculeDataset dataset;
  dataset.name = spec.name;
  dataset.tasks = spec.target_columns;
  dataset.records.reserve(table.rows.size());
  for (const CsvRow& row : table.rows) {
    MoleculeRecord record;
    bool trimmed = false;
    const std::string problem = convert_row(row, table, columns, spec, record, trimmed);
    if (problem.empty()) {
      dataset.trimmed_smiles += trimmed;
      dataset.records.push_back(std::move(record));
      continue;
    }
    const std::string where = weft::detail::concat_message(path, ":", row.line, ": ");
    if (options.bad_rows == OnBadRow::kReject) fail("molecules", where, problem);
    dataset.skipped.push_back(where + problem);
  }
  return dataset;
}

MoleculeDataset read_esol(const std::string& path, const MoleculeOptions& options) {
  return read_molecule_csv(path,
                           {.name = "esol",
                            .smiles_column = "smiles",
                            .target_columns = {"measured log solubility in mols per litre"},
                            .id_column = "Compound ID"},
                           options);
}

MoleculeDataset read_tox21(const std::string& path, const MoleculeOptions& options) {
  return read_molecule_csv(
      path,
      {.name = "tox21",
       .smiles_column = "smiles",
       .target_columns = {"NR-AR", "NR-AR-LBD", "NR-AhR", "NR-Aromatase", "NR-ER", "NR-ER-LBD",
                          "NR-PPAR-gamma", "SR-ARE", "SR-ATAD5", "SR-HSE", "SR-MMP", "SR-p53"},
       .id_column = "mol_id",
       .allow_missing = true,
       .binary = true},
      options);
}

MoleculeDataset read_freesolv(const std::string& path, const MoleculeOptions& options) {
  return read_molecule_csv(path,
                           {.name = "freesolv",
                            .smiles_column = "smiles",
                            .target_columns = {"expt"},
                            .id_column = "iupac"},
                           options);
}

}  // namespace weft::io
