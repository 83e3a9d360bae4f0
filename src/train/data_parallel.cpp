// Data-parallel training (data_parallel.h): agreement and start, shares of each batch, the
// per-step reduction of gradients and figures, sharded evaluation.
#include "data_parallel.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>

#include "batch_shares.h"
#include "weft/core/error.h"
#include "weft/core/rng.h"

namespace weft::train::detail {
namespace {

// Rank `rank`'s contiguous share of `ids` among `ranks` (sizes differ by at most one).
IdSpan shard_of(IdSpan ids, int rank, int ranks) {
  const std::size_t n = ids.size(), r = std::size_t(rank), k = std::size_t(ranks);
  const std::size_t first = n * r / k, last = n * (r + 1) / k;
  return ids.subspan(first, last - first);
}

// A description of what every rank must agree on before training together: the model, its
// data and the run's options. Ranks that differ are named.
std::string run_fingerprint(const TrainableModel& model, std::span<const Parameter> parameters,
                            const nlohmann::json& trainer) {
  nlohmann::json shapes = nlohmann::json::array();
  for (const Parameter& p : parameters) shapes.push_back({p.name(), p.shape().to_string()});
  // The config as JSON where it is (so that a difference names the option), else as text.
  nlohmann::json config = nlohmann::json::parse(model.config_json(), nullptr, false);
  if (config.is_discarded()) config = model.config_json();
  return nlohmann::json{{"model", model.name()},
                        {"config", config},
                        {"examples",
                         {model.num_examples(Split::kTrain), model.num_examples(Split::kDev),
                          model.num_examples(Split::kTest)}},
                        {"parameters", shapes},
                        {"trainer", trainer}}
      .dump();
}

// Appends "path: A on rank 0, B on rank r" for each leaf where two fingerprints differ (objects
// are compared key by key, arrays item by item, so the message names the option itself).
void describe_differences(const nlohmann::json& root, const nlohmann::json& other,
                          const std::string& path, std::size_t rank,
                          std::vector<std::string>& out) {
  if (root == other) return;
  if (root.is_object() && other.is_object()) {
    for (const auto& [key, value] : root.items())
      describe_differences(value, other.contains(key) ? other.at(key) : nlohmann::json(),
                           path + "." + key, rank, out);
    for (const auto& [key, value] : other.items())
      if (!root.contains(key)) describe_differences(nullptr, value, path + "." + key, rank, out);
    return;
  }
  if (root.is_array() && other.is_array() && root.size() == other.size()) {
    for (std::size_t i = 0; i < root.size(); ++i)
      describe_differences(root[i], other[i], path + "[" + std::to_string(i) + "]", rank, out);
    return;
  }
  const auto text = [](const nlohmann::json& v) { return v.is_null() ? "absent" : v.dump(); };
  out.push_back(path.substr(1) + ": " + text(root) + " on rank 0, " + text(other) + " on rank " +
                std::to_string(rank));
}

void check_ranks_agree(dist::Communicator& comm, const std::string& fingerprint) {
  const std::vector<std::string> all = comm.all_gather(fingerprint);
  const nlohmann::json root = nlohmann::json::parse(all[0]);
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    std::vector<std::string> differences;
    describe_differences(root, nlohmann::json::parse(all[r]), "", r, differences);
    constexpr std::size_t kShown = 8;
    std::string listed;
    for (std::size_t i = 0; i < std::min(differences.size(), kShown); ++i)
      listed += (i ? "; " : "") + differences[i];
    if (differences.size() > kShown)
      listed += "; and " + std::to_string(differences.size() - kShown) + " more";
    fail("trainer", "rank ", r, " differs from rank 0: ", listed,
         " (every rank must run the same model on the same data with the same options)");
  }
}

// The sum of every trainable value, to check that the ranks' parameters stay identical.
double parameter_checksum(std::span<const Parameter> parameters) {
  double total = 0;
  for (const Parameter& p : parameters) {
    for (float v : p.value().to_float_vector()) total += double(v);
  }
  return total;
}

// Preparing the next batch on a background thread pays when the machine has a core to spare
// for it; not when the ranks sharing the machine take every core already: each rank's preparer
// then competes with its own runner and with the other ranks (measured on 2 cores, SST, 2
// ranks: 1621 ex/s preparing ahead, 2137 without; BENCHMARKS.md "Data-parallel training").

// A gradient matrix with at least this many rows may be row-sparse (an embedding table's, nonzero
// in the rows of the words a batch used): the all-reduce sends only the rows some rank used.
constexpr std::int64_t kSparseGradientRows = 256;

// Float views of the parameters' gradients (host tensors), for the all-reduce: the dense ones
// (bucketed), the dense tables that may be mostly zero rows, with their row length, and the
// parameters whose gradient is held as rows (Parameter::grad_is_row_sparse).
struct GradientBuffers {
  std::vector<std::span<float>> dense;
  std::vector<std::pair<std::span<float>, std::size_t>> tables;
  std::vector<Parameter> row_sparse;
};

GradientBuffers gradient_buffers(std::span<const Parameter> parameters) {
  GradientBuffers buffers;
  for (const Parameter& p : parameters) {
    if (p.grad_is_row_sparse()) {
      buffers.row_sparse.push_back(p);
      continue;
    }
    Tensor& grad = const_cast<Parameter&>(p).grad();
    if (grad.device() != Device::kCpu) {
      fail("trainer", "data-parallel training needs gradients on the CPU; '", p.name(), "' is on ",
           device_name(grad.device()));
    }
    const std::span<float> data(grad.data<float>(), std::size_t(grad.numel()));
    if (grad.rank() == 2 && grad.shape()[0] >= kSparseGradientRows) {
      buffers.tables.emplace_back(data, std::size_t(grad.shape()[1]));
    } else {
      buffers.dense.push_back(data);
    }
  }
  return buffers;
}

// Sums a row-sparse gradient over the ranks and leaves it row-sparse, so each rank's lazy
// update touches the rows the global batch used, as one process would: the ranks agree on the
// union of their rows (an all-reduce of a row mask, a float per row), then sum those rows
// packed, each rank's scaled by its `share`.
void all_reduce_row_sparse(dist::Communicator& comm, Parameter& p, float share) {
  const RowSparseGrad& mine = p.row_sparse_grad();
  if (mine.rows.device() != Device::kCpu) {
    fail("trainer", "data-parallel training needs gradients on the CPU; '", p.name(), "' is on ",
         device_name(mine.rows.device()));
  }
  const std::vector<std::int32_t> ids = mine.indices.to_int_vector();
  const std::size_t cols = std::size_t(p.value().row_size());
  std::vector<float> mask(std::size_t(p.shape()[0]), 0.0f);
  for (std::int32_t id : ids) mask[std::size_t(id)] = 1.0f;
  comm.all_reduce_sum(std::span<float>(mask));
  std::vector<std::int32_t> all;
  for (std::size_t r = 0; r < mask.size(); ++r)
    if (mask[r] > 0) all.push_back(std::int32_t(r));
  std::vector<float> packed(all.size() * cols, 0.0f);
  const float* rows = mine.rows.data<float>();
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const std::size_t at =
        std::size_t(std::lower_bound(all.begin(), all.end(), ids[k]) - all.begin());
    for (std::size_t c = 0; c < cols; ++c) packed[at * cols + c] = share * rows[k * cols + c];
  }
  comm.all_reduce_sum(std::span<float>(packed));
  const std::int64_t k = std::int64_t(all.size());
  p.zero_grad();
  p.add_grad_rows(Tensor::from_vector(Shape{k}, all),
                  Tensor::from_vector(p.shape().with_rows(k), packed));
}

}  // namespace

void DataParallel::start(TrainableModel& model, std::span<Parameter> parameters,
                         const nlohmann::json& trainer, const TrainingState& state, Rng& rng) {
  check_ranks_agree(comm_, run_fingerprint(model, parameters, trainer));
  for (Parameter& p : parameters) {
    Tensor& value = p.value();
    if (value.device() != Device::kCpu) {
      fail("trainer", "data-parallel training needs parameters on the CPU; '", p.name(), "' is on ",
           device_name(value.device()));
    }
    comm_.broadcast(std::span<std::byte>(static_cast<std::byte*>(value.raw_data()), value.nbytes()),
                    0);
  }
  const std::size_t examples = model.num_examples(Split::kTrain);
  costs_.resize(examples);
  for (std::size_t id = 0; id < examples; ++id) {
    const double cost = model.example_cost(Split::kTrain, id);
    if (!(cost > 0) || !std::isfinite(cost))
      fail("trainer", "model '", model.name(), "' gives training example ", id, " the cost ", cost,
           "; costs must be positive and finite");
    costs_[id] = cost;
  }
  if (!comm_.is_root()) {
    const auto& s = state.rng;
    rng = Rng(mix64(mix64(s[0], s[1]) ^ mix64(s[2], s[3]), std::uint64_t(comm_.rank())));
  }
}

std::vector<IdSpan> DataParallel::shares_of(const std::vector<IdSpan>& global) {
  if (!together()) return global;
  shares_.clear();
  shares_.reserve(global.size());
  for (IdSpan batch : global)
    shares_.push_back(balanced_share(batch, costs_, comm_.rank(), comm_.size()));
  return std::vector<IdSpan>(shares_.begin(), shares_.end());
}

void DataParallel::reduce_step(std::span<const Parameter> trainable, std::size_t mine,
                               std::size_t global, BatchFigures& figures,
                               EpochRecord& record) const {
  if (!together()) return;
  const auto start = std::chrono::steady_clock::now();
  // Each rank's gradient is of its shard's mean loss: weighted by the shard's share, the sum
  // over ranks is the gradient of the global batch's mean loss.
  const float share = float(double(mine) / double(global));
  const GradientBuffers buffers = gradient_buffers(trainable);
  for (std::span<float> buffer : buffers.dense)
    for (float& g : buffer) g *= share;
  dist::all_reduce_buckets(comm_, buffers.dense);
  for (const auto& [table, cols] : buffers.tables)
    dist::all_reduce_sparse_rows(comm_, table, cols, share);
  for (Parameter p : buffers.row_sparse) all_reduce_row_sparse(comm_, p, share);
  double totals[2] = {figures.loss_sum, double(figures.examples)};
  comm_.all_reduce_sum(std::span<double>(totals));
  figures.loss_sum = totals[0];
  figures.examples = std::int64_t(totals[1]);
  record.all_reduce_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++record.all_reduce_steps;
}

void DataParallel::check_replicas(std::span<const Parameter> trainable, std::int64_t step) const {
  const double mine = parameter_checksum(trainable);
  const std::vector<std::string> all = comm_.all_gather(std::to_string(mine));
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) {
      fail("trainer", "after step ", step, " rank ", r, "'s parameters differ from rank 0's ",
           "(checksums ", all[r], " vs ", all[0], ")");
    }
  }
}

IdSpan DataParallel::shard(IdSpan ids) const { return shard_of(ids, comm_.rank(), comm_.size()); }

void DataParallel::sum(std::span<double> totals) const {
  if (together()) comm_.all_reduce_sum(totals);
}

MetricSet DataParallel::merged(const MetricSet& mine) const {
  if (!together()) return mine;
  MetricSet all;
  for (const std::string& text : comm_.all_gather(mine.serialize()))
    all.merge(MetricSet::parse(text));
  return all;
}

std::vector<ExampleScores> DataParallel::gathered(const std::vector<ExampleScores>& mine) const {
  if (!together()) return mine;
  nlohmann::json rows = nlohmann::json::array();
  for (const ExampleScores& row : mine) rows.push_back({row.example, row.values});
  std::vector<ExampleScores> all;
  for (const std::string& text : comm_.all_gather(rows.dump())) {
    for (const nlohmann::json& row : nlohmann::json::parse(text)) {
      all.push_back({row[0].get<std::size_t>(), row[1].get<std::vector<double>>()});
    }
  }
  return all;
}

// Preparing the next batch on a background thread pays when the machine has a core to spare
// for it; not when the ranks sharing the machine take every core already: each rank's preparer
// then competes with its own runner and with the other ranks (measured on 2 cores, SST, 2
// ranks: 1621 ex/s preparing ahead, 2137 without; BENCHMARKS.md "Data-parallel training").
bool DataParallel::prepare_ahead(bool requested) const {
  if (!requested || comm_.local_size() <= 1) return requested;
  return unsigned(comm_.local_size()) < std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace weft::train::detail
