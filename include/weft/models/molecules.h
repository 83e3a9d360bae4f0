// Molecular graph convolutions in the style of the Weave module (Kearnes et al. 2016), written
// with blocks: atom states and atom-pair states are updated together in each layer (atom->atom,
// pair->atom summed over the atom's pairs, atom->pair order-invariantly from its two atoms,
// pair->pair), then a gated sum over atoms and a final FC predict the molecule's targets.
// Pairs are the bonded atom pairs (see molecule_data.h). Tasks: ESOL (solubility regression,
// RMSE) and Tox21 (12 toxicity assays with missing labels, masked loss, mean ROC-AUC).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "weft/core/export.h"
#include "weft/io/csv.h"
#include "weft/models/block_model.h"
#include "weft/models/molecule_data.h"

WEFT_API_BEGIN
namespace weft::models {

class MoleculeModel : public BlockModel {
 public:
  // Reads and parses the task's CSV, splits it and builds the model. Throws weft::Error naming
  // the file (and line, with bad_records=reject) on unreadable or bad data. Unparsable SMILES,
  // malformed rows, molecules without atoms or (Tox21) without any label are skipped and listed
  // in skipped_records() with bad_records=skip.
  explicit MoleculeModel(const OptionValues& options, const ModelInit& init = {});
  ~MoleculeModel() override;

  nlohmann::json assets() const override;
  // A SMILES string, or {"smiles": "..."}.
  nlohmann::json parse_example(std::string_view line, std::string_view where) const override;
  std::vector<std::string> data_notes() const override;
  // Evaluation figures beyond the loss: "rmse" (ESOL) or "roc_auc" (Tox21, mean over tasks),
  // from every example's scores, in example order.
  void finish_split(train::Split split, std::span<const train::ExampleScores> scores,
                    train::MetricSet& figures) const override;

  const std::vector<std::string>& task_names() const;
  // "file:line: why" for every record left out under bad_records=skip.
  const std::vector<std::string>& skipped_records() const;
  // The records of a split, aligned with examples(split).
  std::span<const io::MoleculeRecord> records(train::Split split) const;

 private:
  // ESOL: {"log_solubility": x}; Tox21: {"<task>": probability, ...}.
  std::vector<nlohmann::json> predictions(const blocks::BatchResult& result,
                                          std::size_t count) override;
  train::BatchFigures figures(const blocks::BatchResult& result, const train::Batch& batch,
                              bool training) override;

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::models
WEFT_API_END
