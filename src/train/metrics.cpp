// Running means, hit counters and MetricSet (see weft/train/metrics.h). JSON goes through
// nlohmann-json so names are escaped and doubles written to round-trip.
#include "weft/train/metrics.h"

#include <nlohmann/json.hpp>

#include "weft/core/error.h"

namespace weft::train {

void RunningMean::add(double value, double weight) {
  if (!(weight >= 0)) fail("metrics", "a running mean's weight must be >= 0, got ", weight);
  sum_ += value * weight;
  weight_ += weight;
}

void RunningMean::merge(const RunningMean& other) {
  sum_ += other.sum_;
  weight_ += other.weight_;
}

void HitCounter::add(std::int64_t hits, std::int64_t total) {
  if (hits < 0 || total < 0 || hits > total)
    fail("metrics", "hits must lie in [0, total], got ", hits, " of ", total);
  hits_ += hits;
  total_ += total;
}

void HitCounter::merge(const HitCounter& other) {
  hits_ += other.hits_;
  total_ += other.total_;
}

MetricSet::Figure& MetricSet::figure(const std::string& name, bool is_hits) {
  if (name.empty()) fail("metrics", "a metric needs a non-empty name");
  auto [it, inserted] = figures_.try_emplace(name);
  if (inserted) {
    it->second.is_hits = is_hits;
  } else if (it->second.is_hits != is_hits) {
    fail("metrics", "metric '", name, "' is a ", it->second.is_hits ? "hit rate" : "mean",
         " and cannot be added to as a ", is_hits ? "hit rate" : "mean");
  }
  return it->second;
}

void MetricSet::add_mean(const std::string& name, double value, double weight) {
  if (!(weight >= 0)) fail("metrics", "metric '", name, "': weight must be >= 0, got ", weight);
  Figure& f = figure(name, false);
  f.sum += value * weight;
  f.weight += weight;
}

void MetricSet::add_hits(const std::string& name, std::int64_t hits, std::int64_t total) {
  if (hits < 0 || total < 0 || hits > total)
    fail("metrics", "metric '", name, "': hits must lie in [0, total], got ", hits, " of ", total);
  Figure& f = figure(name, true);
  f.sum += double(hits);
  f.weight += double(total);
}

void MetricSet::merge(const MetricSet& other) {
  for (const auto& [name, theirs] : other.figures_) {
    Figure& mine = figure(name, theirs.is_hits);
    mine.sum += theirs.sum;
    mine.weight += theirs.weight;
  }
}

double MetricSet::value(const std::string& name) const {
  const auto it = figures_.find(name);
  if (it == figures_.end()) {
    std::string known;
    for (const auto& entry : figures_) known += (known.empty() ? "" : ", ") + entry.first;
    fail("metrics", "no metric '", name, "'; the set has ", known.empty() ? "none" : known);
  }
  return it->second.weight > 0 ? it->second.sum / it->second.weight : 0.0;
}

std::vector<std::string> MetricSet::names() const {
  std::vector<std::string> out;
  for (const auto& entry : figures_) out.push_back(entry.first);
  return out;
}

std::string MetricSet::serialize() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [name, f] : figures_) out.push_back({name, f.is_hits, f.sum, f.weight});
  return out.dump();
}

MetricSet MetricSet::parse(std::string_view text) {
  const nlohmann::json in = nlohmann::json::parse(text, nullptr, false);
  if (!in.is_array()) fail("metrics", "not a serialized MetricSet");
  MetricSet set;
  for (const nlohmann::json& f : in) {
    if (!f.is_array() || f.size() != 4 || !f[0].is_string() || !f[1].is_boolean() ||
        !f[2].is_number() || !f[3].is_number()) {
      fail("metrics", "not a serialized MetricSet figure: ", f.dump().substr(0, 80));
    }
    Figure& mine = set.figure(f[0].get<std::string>(), f[1].get<bool>());
    mine.sum += f[2].get<double>();
    mine.weight += f[3].get<double>();
  }
  return set;
}

std::string MetricSet::to_json() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& entry : figures_) out[entry.first] = value(entry.first);
  return out.dump();
}

std::int64_t argmax_hits(const Tensor& logits, const Tensor& labels) {
  if (logits.rank() != 2 || logits.dtype() != DType::kFloat32)
    fail("argmax_hits", "logits must be float32 [B, C], got ", logits.describe());
  if (labels.rank() != 1 || labels.dtype() != DType::kInt32 || labels.numel() != logits.rows())
    fail("argmax_hits", "labels must be int32 [", logits.rows(), "] for logits ", logits.describe(),
         ", got ", labels.describe());
  const std::vector<float> z = logits.to_float_vector();
  const std::vector<std::int32_t> y = labels.to_int_vector();
  const std::int64_t classes = logits.shape()[1];
  std::int64_t hits = 0;
  for (std::size_t r = 0; r < y.size(); ++r) {
    const float* row = z.data() + std::int64_t(r) * classes;
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < classes; ++c)
      if (row[c] > row[best]) best = c;
    hits += (classes > 0 && best == y[r]) ? 1 : 0;
  }
  return hits;
}

}  // namespace weft::train
