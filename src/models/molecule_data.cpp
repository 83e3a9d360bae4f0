// The molecule model's data: graphs as Input, the duplicate-aware seeded split, and the
// MoleculeNet figures (RMSE, mean ROC-AUC over tasks).
#include "weft/models/molecule_data.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "weft/core/error.h"
#include "weft/core/rng.h"

namespace weft::models {

using nlohmann::json;

namespace {

// The rows of a float [n, k] tensor as JSON arrays of integers where the value is whole (the
// features are 0/1), which keeps the examples small.
json rows_of(const Tensor& t) {
  const std::vector<float> values = t.to_float_vector();
  const std::size_t k = t.shape().rank() == 2 ? std::size_t(t.shape()[1]) : 0;
  json rows = json::array();
  for (std::size_t r = 0; k > 0 && r < values.size() / k; ++r) {
    json row = json::array();
    for (std::size_t c = 0; c < k; ++c) {
      const float v = values[r * k + c];
      if (v == std::floor(v)) {
        row.push_back(std::int32_t(v));
      } else {
        row.push_back(v);
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

json molecule_example(const io::MoleculeGraph& graph) {
  json pair_atoms = json::array();
  json atom_pairs = json::array();
  for (std::size_t a = 0; a < graph.atoms.size(); ++a) atom_pairs.push_back(json::array());
  for (std::size_t b = 0; b < graph.bonds.size(); ++b) {
    const io::BondInfo& bond = graph.bonds[b];
    pair_atoms.push_back(json::array({bond.begin, bond.end}));
    // The bond is listed once; it is a pair of both its atoms (the mirror for the second).
    atom_pairs[std::size_t(bond.begin)].push_back(std::int32_t(b));
    atom_pairs[std::size_t(bond.end)].push_back(std::int32_t(b));
  }
  json pairs = graph.bonds.empty() ? json::array() : rows_of(io::bond_features(graph));
  return json{{"atoms", rows_of(io::atom_features(graph))},
              {"pairs", std::move(pairs)},
              {"pair_atoms", std::move(pair_atoms)},
              {"atom_pairs", std::move(atom_pairs)}};
}

std::vector<std::vector<std::size_t>> split_by_smiles(std::span<const io::MoleculeRecord> records,
                                                      std::uint64_t seed, double train_share,
                                                      double dev_share) {
  // Groups in order of first appearance, so the outcome does not depend on map ordering.
  std::map<std::string, std::size_t> group_of;
  std::vector<std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < records.size(); ++i) {
    auto [it, added] = group_of.emplace(records[i].smiles, groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  Rng rng(seed);
  for (std::size_t i = groups.size(); i > 1; --i) {  // Fisher-Yates
    std::swap(groups[i - 1], groups[std::size_t(rng.below(i))]);
  }
  const double n = double(records.size());
  const double limits[2] = {train_share * n, (train_share + dev_share) * n};
  std::vector<std::vector<std::size_t>> splits(3);
  std::size_t taken = 0, split = 0;
  for (const std::vector<std::size_t>& group : groups) {
    while (split < 2 && double(taken) >= limits[split] - 0.5) ++split;
    splits[split].insert(splits[split].end(), group.begin(), group.end());
    taken += group.size();
  }
  return splits;
}

double roc_auc(std::span<const double> scores, std::span<const std::uint8_t> labels) {
  if (scores.size() != labels.size())
    fail("roc_auc", scores.size(), " scores but ", labels.size(), " labels");
  std::vector<std::size_t> order(scores.size());
  std::iota(order.begin(), order.end(), std::size_t(0));
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return scores[a] < scores[b]; });
  // Mann-Whitney: the positives' rank sum, tied scores sharing their mean rank.
  double positive_ranks = 0;
  std::size_t positives = 0;
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j < order.size() && scores[order[j]] == scores[order[i]]) ++j;
    const double mean_rank = double(i + j + 1) / 2.0;  // ranks i+1 .. j
    for (std::size_t k = i; k < j; ++k) {
      if (labels[order[k]] != 0) {
        positive_ranks += mean_rank;
        ++positives;
      }
    }
    i = j;
  }
  const std::size_t negatives = scores.size() - positives;
  if (positives == 0 || negatives == 0) return std::numeric_limits<double>::quiet_NaN();
  const double p = double(positives);
  return (positive_ranks - p * (p + 1) / 2.0) / (p * double(negatives));
}

double rmse(std::span<const double> predictions, std::span<const double> targets) {
  if (predictions.size() != targets.size())
    fail("rmse", predictions.size(), " predictions but ", targets.size(), " targets");
  if (predictions.empty()) return 0;
  double sum = 0;
  for (std::size_t i = 0; i < predictions.size(); ++i) {
    const double d = predictions[i] - targets[i];
    sum += d * d;
  }
  return std::sqrt(sum / double(predictions.size()));
}

void MoleculeScores::clear() {
  examples_ = 0;
  scores_.assign(tasks_, {});
  targets_.assign(tasks_, {});
  labels_.assign(tasks_, {});
}

void MoleculeScores::add(std::span<const double> scores, const io::MoleculeRecord& record) {
  if (scores_.size() != tasks_) clear();
  if (scores.size() != tasks_ || record.targets.size() != tasks_)
    fail("molecules", "expected ", tasks_, " scores and targets, got ", scores.size(), " and ",
         record.targets.size());
  for (std::size_t t = 0; t < tasks_; ++t) {
    if (!record.present[t]) continue;
    scores_[t].push_back(scores[t]);
    targets_[t].push_back(record.targets[t]);
    labels_[t].push_back(record.targets[t] > 0.5f ? 1 : 0);
  }
  ++examples_;
}

double MoleculeScores::rmse() const {
  return scores_.empty() ? 0.0 : models::rmse(scores_[0], targets_[0]);
}

double MoleculeScores::mean_roc_auc() const {
  double sum = 0;
  int counted = 0;
  for (std::size_t t = 0; t < scores_.size(); ++t) {
    const double auc = roc_auc(scores_[t], labels_[t]);
    if (std::isnan(auc)) continue;
    sum += auc;
    ++counted;
  }
  return counted > 0 ? sum / counted : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace weft::models
