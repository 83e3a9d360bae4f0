// The measurements of `weft bench decode` (bench_decode_measure.cpp), apart from its command
// line and output (bench_decode_command.cpp): one decoding model's arms, each timed in every
// round on the same held-out examples: (a) a batch decoded together, (b) the same examples one
// at a time, (c) batches whose outputs all have one length, matched to (a)'s lengths, and (d)
// training steps at the batch size and one example at a time.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/backend/counters.h"
#include "weft/core/rng.h"
#include "weft/models/decoding.h"
#include "weft/models/model.h"
#include "weft/train/optimizer.h"

namespace weft::tool::decode_bench {

// One arm's rate in every round (sequences or examples per second), and in the untimed warm-up
// round before them (the shapes' first GEMM calibrations and allocations), which no figure counts.
struct Rates {
  std::vector<double> rounds;
  double warmup = 0;
  double median() const;
  // A round's rate: into `rounds`, or the warm-up's.
  void record(double rate, bool counted) { counted ? rounds.push_back(rate) : void(warmup = rate); }
};

// One batch of arm (c): `examples` (the batch size of them) whose decoding takes `steps` engine
// steps each, standing for the `weight` examples of (a)'s batch that take as many.
struct Bucket {
  std::int64_t steps = 0;
  std::int64_t weight = 0;
  std::vector<nlohmann::json> examples;
  std::size_t distinct = 0;     // distinct held-out examples among them (the rest repeat those)
  std::int64_t off_length = 0;  // those that took another number of steps in this batch
};

// Where an arm's time goes (--profile), per sequence decoded: its wall time with work profiling
// on, and the profile's kernel time and bytes written by kind (weft/backend/counters.h).
struct ArmProfile {
  double seconds = 0;
  std::array<double, kWorkKinds> kind_seconds{}, kind_bytes{};
  void add(const WorkProfile& profile, double wall_seconds, double scale);
};

// One search (greedy, or beam search of a width) of one model: what was checked and timed.
struct Search {
  std::string name;  // "greedy" or "beam4"
  models::DecodeSettings settings;
  std::vector<std::int64_t> steps;      // each of (a)'s examples' length in steps
  std::vector<nlohmann::json> answers;  // (a)'s answers
  std::vector<Bucket> buckets;
  Rates batch, one_at_a_time, one_length;
  ArmProfile batch_profile, one_length_profile;  // filled with --profile
};

// Decodes `examples` together and then one at a time with `search.settings`, and fails (one line
// naming the model, the search, the example and the first difference) unless the answers and
// the steps agree; fills search.steps and search.answers.
void check_batched_equals_alone(models::DecodingModel& model, std::string_view model_name,
                                std::span<const nlohmann::json> examples, Search& search);

// Arm (c)'s batches for (a)'s `examples` (search.steps filled in): for each length among them,
// `batch` examples of exactly that length: (a)'s own, then those found by decoding `pool`
// (held-out examples) untimed in batches, then repeats of those when the pool runs short. Each
// batch is decoded once more to count the examples that take another length in it (off_length).
std::vector<Bucket> one_length_batches(models::DecodingModel& model,
                                       std::span<const nlohmann::json> examples,
                                       std::span<const nlohmann::json> pool, std::size_t batch,
                                       const Search& search);

// Sequences per second decoding `examples` in batches of `batch` (a: the batch size, b: 1).
// `warm` (--warm): each timed decode call right after an untimed one of the same examples.
double decode_rate(models::DecodingModel& model, std::span<const nlohmann::json> examples,
                   std::size_t batch, const models::DecodeSettings& settings, bool warm);
// Arm (c): each bucket's batch timed, the rate weighted to (a)'s lengths: sum of weights over
// sum of (weight / batch size) x the bucket's batch time; `warm` as for decode_rate.
double one_length_rate(models::DecodingModel& model, std::span<const Bucket> buckets,
                       const models::DecodeSettings& settings, bool warm);

// One profiled decoding of arm (a) and of arm (c)'s batches (weighted as one_length_rate weighs
// them), into search.batch_profile and search.one_length_profile.
void profile_arms(models::DecodingModel& model, std::span<const nlohmann::json> examples,
                  Search& search);

// Arm (d): optimizer steps by teacher forcing on examples of a model's test split, on a model
// of its own (its weights move, the decoding model's must not).
class TrainingArm {
 public:
  // The recipe's optimizer, learning rate and clip_norm; `ids` index the model's test split.
  TrainingArm(models::Model& model, const nlohmann::json& recipe, std::vector<std::size_t> ids);
  // Examples per second over the ids in batches of `batch`: per batch zero_grad, forward and
  // backward (train_batch), clipping, the optimizer's step.
  double rate(std::size_t batch);

 private:
  models::Model& model_;
  std::unique_ptr<train::Optimizer> optimizer_;
  double learning_rate_ = 0, clip_norm_ = 0;
  std::vector<std::size_t> ids_;
  Rng rng_{1};
};

// Whether a decoding ended by the model's choice rather than at its step bound (every decoding
// model's answer says so in "ended").
bool ended(const nlohmann::json& answer);

}  // namespace weft::tool::decode_bench
