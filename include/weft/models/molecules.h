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

#include "weft/io/csv.h"
#include "weft/models/model.h"
#include "weft/models/molecule_data.h"

namespace weft::models {

struct MoleculeOptions {
  std::string data_dir;  // holds molecules/{delaney-processed,tox21}.csv
  MoleculeTask task = MoleculeTask::kEsol;
  std::int64_t hidden = 64;         // atom state size
  std::int64_t pair_hidden = 32;    // pair state size
  std::int64_t graph_hidden = 128;  // the gated sum over atoms
  int layers = 2;                   // Weave layers
  // Unparsable SMILES, malformed rows, molecules without atoms or (Tox21) without any label:
  // kSkip leaves them out and lists them in skipped_records(); kReject throws naming the line.
  io::OnBadRow bad_records = io::OnBadRow::kSkip;
  std::uint64_t seed = 1;      // the split and the initial weights
  std::int64_t max_train = 0;  // 0: all; otherwise the first n of the split, for tests and demos
  std::int64_t max_eval = 0;
  int weave_threads = 0;  // 0: the compiler's default
};

class MoleculeModel : public Model {
 public:
  // Reads and parses the task's CSV, splits it and builds the model. Throws weft::Error naming
  // the file (and line, under kReject) on unreadable or bad data.
  explicit MoleculeModel(MoleculeOptions options);
  ~MoleculeModel() override;

  std::string name() const override { return "molecules"; }
  std::string config_json() const override;
  std::vector<Parameter> parameters() override;
  std::size_t num_examples(train::Split split) const override;
  // Training figures: the loss only. Evaluation adds, once the whole split has been seen in
  // order (as Trainer::evaluate does), "rmse" (ESOL) or "roc_auc" (Tox21, mean over tasks):
  // these do not decompose into per-batch means, so they are reported whole by the last batch.
  train::BatchFigures train_batch(const train::Batch& batch, Rng& rng) override;
  train::BatchFigures eval_batch(const train::Batch& batch) override;
  std::unique_ptr<train::PreparedBatch> prepare_batch(train::Split split,
                                                      std::span<const std::size_t> ids) override;

  // A SMILES string, or {"smiles": "..."}.
  nlohmann::json parse_example(std::string_view line, std::string_view where) const override;
  // ESOL: {"log_solubility": x}; Tox21: {"<task>": probability, ...}.
  std::vector<nlohmann::json> predict(std::span<const nlohmann::json> examples) override;
  const blocks::Block& root_block() const override;
  std::span<const nlohmann::json> examples(train::Split split) const override;

  const std::vector<std::string>& task_names() const;
  // "file:line: why" for every record left out under kSkip.
  const std::vector<std::string>& skipped_records() const;
  // The records of a split, aligned with examples(split).
  std::span<const io::MoleculeRecord> records(train::Split split) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::models
