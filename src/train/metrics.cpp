// Exact sums, running means, hit counters and MetricSet (see weft/train/metrics.h). JSON goes
// through nlohmann-json so names are escaped and doubles written to round-trip.
#include "weft/train/metrics.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "weft/core/error.h"

namespace weft::train {
namespace {
__extension__ typedef unsigned __int128 Uint128;
}  // namespace

void ExactSum::add(double term) {
  if (!std::isfinite(term)) {
    special_ += term;
    has_special_ = true;
    return;
  }
  if (term != 0.0) add_finite(term);
}

void ExactSum::add(std::span<const float> terms) {
  for (float term : terms) add(double(term));
}

// term = ±mantissa · 2^(exponent - 53), a 53-bit mantissa spread over the three limbs its bits
// fall in. A limb moves by less than 2^32 a term, so carries every 2^30 terms keep it in range.
void ExactSum::add_finite(double term) {
  if (unnormalised_ >= (1 << 30)) carry();
  int exponent = 0;
  const double fraction = std::frexp(std::fabs(term), &exponent);
  const auto mantissa = static_cast<std::uint64_t>(std::ldexp(fraction, 53));
  const int shift = exponent - 53 - kLowestBit;
  const int limb = shift / kLimbBits;
  const Uint128 bits = static_cast<Uint128>(mantissa) << (shift % kLimbBits);
  const std::int64_t sign = term < 0 ? -1 : 1;
  for (int i = 0; i < 3; ++i) {
    const auto chunk = static_cast<std::int64_t>((bits >> (kLimbBits * i)) & 0xffffffffu);
    limbs_[std::size_t(limb + i)] += sign * chunk;
  }
  ++unnormalised_;
}

void ExactSum::carry() {
  for (std::size_t i = 0; i + 1 < limbs_.size(); ++i) {
    const std::int64_t over = limbs_[i] >> kLimbBits;  // floor division by 2^32
    limbs_[i] -= over * (std::int64_t(1) << kLimbBits);
    limbs_[i + 1] += over;
  }
  unnormalised_ = 0;
}

void ExactSum::merge(const ExactSum& other) {
  ExactSum theirs = other;
  theirs.carry();
  if (unnormalised_ >= (1 << 30)) carry();
  for (std::size_t i = 0; i < limbs_.size(); ++i) limbs_[i] += theirs.limbs_[i];
  ++unnormalised_;
  if (other.has_special_) {
    special_ += other.special_;
    has_special_ = true;
  }
}

// The carried limbs are one canonical form of the sum, so the rounding below sees the same
// bits whatever order the terms came in: the top 96 bits, with a sticky bit for any below,
// converted to double (round to nearest) and scaled.
double ExactSum::value() const {
  if (has_special_) return special_;
  ExactSum magnitude = *this;
  magnitude.carry();
  const bool negative = magnitude.limbs_.back() < 0;
  if (negative) {
    for (std::int64_t& limb : magnitude.limbs_) limb = -limb;
    magnitude.carry();
  }
  int top = kLimbs - 1;
  while (top >= 0 && magnitude.limbs_[std::size_t(top)] == 0) --top;
  if (top < 0) return 0.0;
  Uint128 bits = 0;
  for (int i = top; i >= top - 2; --i)
    bits = (bits << kLimbBits) |
           (i >= 0 ? static_cast<std::uint64_t>(magnitude.limbs_[std::size_t(i)]) : 0u);
  for (int i = top - 3; i >= 0; --i)
    if (magnitude.limbs_[std::size_t(i)] != 0) bits |= 1u;
  const double value = std::ldexp(static_cast<double>(bits), kLowestBit + kLimbBits * (top - 2));
  return negative ? -value : value;
}

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
  f.sum.add(value * weight);
  f.weight += weight;
}

void MetricSet::add_mean_of(const std::string& name, std::span<const float> terms) {
  Figure& f = figure(name, false);
  f.sum.add(terms);
  f.weight += double(terms.size());
}

void MetricSet::add_hits(const std::string& name, std::int64_t hits, std::int64_t total) {
  if (hits < 0 || total < 0 || hits > total)
    fail("metrics", "metric '", name, "': hits must lie in [0, total], got ", hits, " of ", total);
  Figure& f = figure(name, true);
  f.sum.add(double(hits));
  f.weight += double(total);
}

void MetricSet::merge(const MetricSet& other) {
  for (const auto& [name, theirs] : other.figures_) {
    Figure& mine = figure(name, theirs.is_hits);
    mine.sum.merge(theirs.sum);
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
  return it->second.weight > 0 ? it->second.sum.value() / it->second.weight : 0.0;
}

std::vector<std::string> MetricSet::names() const {
  std::vector<std::string> out;
  for (const auto& entry : figures_) out.push_back(entry.first);
  return out;
}

std::string MetricSet::serialize() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [name, f] : figures_) out.push_back({name, f.is_hits, f.sum.value(), f.weight});
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
    mine.sum.add(f[2].get<double>());
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
