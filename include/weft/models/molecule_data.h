// The molecule model's data: MoleculeNet records (io/molecules.h) whose SMILES are parsed into
// graphs (io/molecule_graph.h) and laid out as the blocks' Input, a seeded 80/10/10 split that
// keeps every copy of a SMILES in one split, and the figures MoleculeNet reports for the two
// tasks: RMSE (ESOL) and ROC-AUC averaged over tasks (Tox21).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/core/export.h"
#include "weft/core/named_enum.h"
#include "weft/io/molecule_graph.h"
#include "weft/io/molecules.h"

WEFT_API_BEGIN
namespace weft::models {

#define WEFT_MOLECULE_TASKS(X) \
  X(kEsol, "esol")             \
  X(kTox21, "tox21")
enum class MoleculeTask { WEFT_MOLECULE_TASKS(WEFT_ENUMERATOR) };
WEFT_ENUM_NAMES(MoleculeTask, WEFT_MOLECULE_TASKS, molecule_task_name, parse_molecule_task,
                "molecules", "task")

// A molecule as the model's Input. Pairs are the BONDED atom pairs, each bond once:
//   {"atoms":      [[36 atom features] per heavy atom],
//    "pairs":      [[6 bond features] per bond],
//    "pair_atoms": [[i, j] per bond],
//    "atom_pairs": [[the bonds at atom i] per atom]}   (each bond appears at both its atoms)
nlohmann::json molecule_example(const io::MoleculeGraph& graph);

// Records with their graphs as Input, in split order.
struct MoleculeSplit {
  std::vector<io::MoleculeRecord> records;
  std::vector<nlohmann::json> examples;  // molecule_example of each record
};

// Shuffles the distinct SMILES with `seed` and fills train, dev, test in that order up to
// train_share and dev_share of the records (test takes the rest), a SMILES's copies together.
// Returns the record indices of each split.
std::vector<std::vector<std::size_t>> split_by_smiles(std::span<const io::MoleculeRecord> records,
                                                      std::uint64_t seed, double train_share = 0.8,
                                                      double dev_share = 0.1);

// Area under the ROC curve of `scores` against 0/1 `labels`: the probability that a random
// positive scores above a random negative, ties counting one half. NaN unless both classes occur.
double roc_auc(std::span<const double> scores, std::span<const std::uint8_t> labels);
// sqrt(mean((p - t)^2)); 0 for no values.
double rmse(std::span<const double> predictions, std::span<const double> targets);

// Collects a split's predictions batch by batch, for the figures that do not decompose into
// per-batch means (ROC-AUC, RMSE's square root). scores: one row of `tasks` per example.
class MoleculeScores {
 public:
  explicit MoleculeScores(std::size_t tasks = 1) : tasks_(tasks) {}
  void clear();
  void add(std::span<const double> scores, const io::MoleculeRecord& record);
  std::size_t size() const { return examples_; }
  // RMSE of task 0 (regression).
  double rmse() const;
  // The mean over tasks of roc_auc on the examples labelled for the task; tasks with a single
  // class are left out (NaN when every task is).
  double mean_roc_auc() const;

 private:
  std::size_t tasks_;
  std::size_t examples_ = 0;
  std::vector<std::vector<double>> scores_;        // per task
  std::vector<std::vector<double>> targets_;       // per task
  std::vector<std::vector<std::uint8_t>> labels_;  // per task, 0/1 of targets_
};

}  // namespace weft::models
WEFT_API_END
