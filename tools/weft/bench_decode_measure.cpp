// The arms of `weft bench decode` (bench_decode.h): the check that a batch decodes as its
// examples do alone, the matched one-length batches, and the timed loops.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "bench_decode.h"
#include "weft/core/error.h"

namespace weft::tool::decode_bench {

using nlohmann::json;

namespace {

constexpr const char* kCommand = "weft bench decode";

// Seconds `run` takes.
template <typename Run>
double seconds_of(Run&& run) {
  const auto start = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Where two answers differ ("" where they agree): numbers within a relative 1e-4 (a batch's
// products may round otherwise than one row's), everything else exactly.
std::string difference(const json& a, const json& b, const std::string& at) {
  if (a.is_number_float() || b.is_number_float()) {
    const bool close =
        a.is_number() && b.is_number() &&
        std::abs(a.get<double>() - b.get<double>()) <=
            1e-4 * std::max({1.0, std::abs(a.get<double>()), std::abs(b.get<double>())});
    return close ? "" : fmt::format("{}: {} against {}", at, a.dump(), b.dump());
  }
  if (a.type() != b.type() || a.size() != b.size() || (!a.is_structured() && a != b))
    return fmt::format("{}: {} against {}", at, a.dump(), b.dump());
  if (a.is_array()) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      std::string d = difference(a[i], b[i], fmt::format("{}[{}]", at, i));
      if (!d.empty()) return d;
    }
  } else if (a.is_object()) {
    for (const auto& [key, value] : a.items()) {
      if (!b.contains(key)) return fmt::format("{}: \"{}\" is missing alone", at, key);
      std::string d = difference(value, b[key], at + "." + key);
      if (!d.empty()) return d;
    }
  }
  return "";
}

}  // namespace

double Rates::median() const {
  if (rounds.empty()) return 0;
  std::vector<double> sorted = rounds;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

bool ended(const json& answer) { return answer.value("ended", false); }

void check_batched_equals_alone(models::DecodingModel& model, std::string_view model_name,
                                std::span<const json> examples, Search& search) {
  search.answers = model.decode(examples, search.settings, &search.steps);
  for (std::size_t e = 0; e < examples.size(); ++e) {
    std::vector<std::int64_t> steps;
    const std::vector<json> alone = model.decode(examples.subspan(e, 1), search.settings, &steps);
    std::string d = difference(search.answers[e], alone.at(0), "answer");
    if (d.empty() && steps.at(0) != search.steps[e])
      d = fmt::format("{} steps in the batch against {} alone", search.steps[e], steps[0]);
    if (!d.empty())
      fail(kCommand, model_name, " ", search.name, ": held-out example ", e,
           " decodes differently in the batch and alone (", d, ")");
  }
}

namespace {

// Files up to `batch` examples into the bucket of each one's length (lengths not wanted are
// skipped).
void sort_into(std::map<std::int64_t, Bucket*>& wanted, std::span<const json> examples,
               std::span<const std::int64_t> steps, std::size_t batch) {
  for (std::size_t e = 0; e < examples.size(); ++e) {
    const auto it = wanted.find(steps[e]);
    if (it == wanted.end() || it->second->examples.size() >= batch) continue;
    it->second->examples.push_back(examples[e]);
  }
}

bool all_full(const std::map<std::int64_t, Bucket*>& wanted, std::size_t batch) {
  return std::all_of(wanted.begin(), wanted.end(),
                     [batch](const auto& w) { return w.second->examples.size() >= batch; });
}

}  // namespace

std::vector<Bucket> one_length_batches(models::DecodingModel& model, std::span<const json> examples,
                                       std::span<const json> pool, std::size_t batch,
                                       const Search& search) {
  std::map<std::int64_t, std::int64_t> weights;
  for (std::int64_t s : search.steps) ++weights[s];
  std::vector<Bucket> buckets;
  for (const auto& [steps, weight] : weights) buckets.push_back({steps, weight, {}, 0, 0});
  std::map<std::int64_t, Bucket*> wanted;
  for (Bucket& b : buckets) wanted[b.steps] = &b;
  sort_into(wanted, examples, search.steps, batch);
  for (std::size_t at = 0; at < pool.size() && !all_full(wanted, batch); at += batch) {
    const std::span<const json> part = pool.subspan(at, std::min(batch, pool.size() - at));
    std::vector<std::int64_t> steps;
    model.decode(part, search.settings, &steps);
    sort_into(wanted, part, steps, batch);
  }
  for (Bucket& b : buckets) {
    b.distinct = b.examples.size();
    for (std::size_t i = 0; b.examples.size() < batch; ++i) b.examples.push_back(b.examples[i]);
    std::vector<std::int64_t> steps;
    model.decode(b.examples, search.settings, &steps);
    b.off_length =
        std::count_if(steps.begin(), steps.end(), [&b](std::int64_t s) { return s != b.steps; });
  }
  return buckets;
}

namespace {

// Seconds of one decode call of `examples`; with `warm`, after an untimed call of the same.
double decode_seconds(models::DecodingModel& model, std::span<const json> examples,
                      const models::DecodeSettings& settings, bool warm) {
  if (warm) model.decode(examples, settings);
  return seconds_of([&] { model.decode(examples, settings); });
}

}  // namespace

double decode_rate(models::DecodingModel& model, std::span<const json> examples, std::size_t batch,
                   const models::DecodeSettings& settings, bool warm) {
  double seconds = 0;
  for (std::size_t at = 0; at < examples.size(); at += batch)
    seconds += decode_seconds(model, examples.subspan(at, std::min(batch, examples.size() - at)),
                              settings, warm);
  return double(examples.size()) / seconds;
}

double one_length_rate(models::DecodingModel& model, std::span<const Bucket> buckets,
                       const models::DecodeSettings& settings, bool warm) {
  double seconds = 0, examples = 0;
  for (const Bucket& b : buckets) {
    const double batch_seconds = decode_seconds(model, b.examples, settings, warm);
    seconds += batch_seconds * double(b.weight) / double(b.examples.size());
    examples += double(b.weight);
  }
  return examples / seconds;
}

void ArmProfile::add(const WorkProfile& profile, double wall_seconds, double scale) {
  seconds += wall_seconds * scale;
  for (std::size_t k = 0; k < kWorkKinds; ++k) {
    kind_seconds[k] += (profile.forward[k].seconds + profile.backward[k].seconds) * scale;
    kind_bytes[k] += double(profile.forward[k].bytes + profile.backward[k].bytes) * scale;
  }
}

namespace {

// `examples` decoded once with work profiling on: the profile and the wall seconds.
std::pair<WorkProfile, double> profiled_decode(models::DecodingModel& model,
                                               std::span<const json> examples,
                                               const models::DecodeSettings& settings) {
  const bool was = set_work_profiling(true);
  const WorkProfile before = backend_counters().profile;
  const double seconds = seconds_of([&] { model.decode(examples, settings); });
  const WorkProfile profile = backend_counters().profile - before;
  set_work_profiling(was);
  return {profile, seconds};
}

}  // namespace

void profile_arms(models::DecodingModel& model, std::span<const json> examples, Search& search) {
  search.batch_profile = {};
  search.one_length_profile = {};
  const auto [batch, batch_seconds] = profiled_decode(model, examples, search.settings);
  search.batch_profile.add(batch, batch_seconds, 1.0 / double(examples.size()));
  double weights = 0;
  for (const Bucket& b : search.buckets) weights += double(b.weight);
  for (const Bucket& b : search.buckets) {
    const auto [profile, seconds] = profiled_decode(model, b.examples, search.settings);
    // Per sequence of (a)'s length mix: this batch stands for b.weight of (a)'s sequences.
    search.one_length_profile.add(profile, seconds,
                                  double(b.weight) / double(b.examples.size()) / weights);
  }
}

TrainingArm::TrainingArm(models::Model& model, const json& recipe, std::vector<std::size_t> ids)
    : model_(model), ids_(std::move(ids)) {
  train::OptimizerSpec spec;
  spec.kind = train::parse_optimizer_kind(recipe.value("optimizer", std::string("sgd")));
  learning_rate_ = recipe.value("learning_rate", 0.01);
  clip_norm_ = recipe.value("clip_norm", 0.0);
  const std::vector<Parameter> parameters = model_.parameters();
  optimizer_ = train::make_optimizer(spec, parameters);
}

double TrainingArm::rate(std::size_t batch) {
  const std::span<const std::size_t> ids(ids_);
  const double seconds = seconds_of([&] {
    for (std::size_t at = 0; at < ids.size(); at += batch) {
      optimizer_->zero_grad();
      model_.train_batch({train::Split::kTest, ids.subspan(at, std::min(batch, ids.size() - at))},
                         rng_);
      if (clip_norm_ > 0) train::clip_grad_norm(optimizer_->parameters(), clip_norm_);
      optimizer_->step(learning_rate_);
    }
  });
  return double(ids.size()) / seconds;
}

}  // namespace weft::tool::decode_bench
