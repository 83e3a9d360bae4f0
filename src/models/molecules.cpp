// The Weave-style molecule model with blocks: its registry entry and recipe, the model
// definition (make_blocks and the weave_layer it repeats), reading the data set, and batches,
// losses, split-level figures and predictions.
#include "weft/models/molecules.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "weft/autodiff/ops.h"
#include "weft/blocks/compiler.h"
#include "weft/core/error.h"
#include "weft/io/json_lines.h"
#include "weft/models/registry.h"
#include "weft/nn/fc.h"
#include "weft/nn/parameter_store.h"

namespace weft::models {

using blocks::Block;
using blocks::Composition;
using blocks::Function;
using blocks::Type;
using nlohmann::json;

namespace {

// One Weave layer's weights (Kearnes et al., Fig. 3): atom->atom, pair->atom, atom->pair and
// pair->pair transforms, and the two that merge each side's messages.
struct WeaveWeights {
  std::unique_ptr<nn::FC> atom_to_atom, pair_to_atom, atom, atom_to_pair, pair_to_pair, pair;
};

// Tuple(Sequence(T) values, Input id lists) -> Sequence(T): for each list, the sum of
// values[id] over its ids (zeros for none), every list read in one GatherLists step.
Block sum_per_list() {
  return blocks::GatherLists() >> blocks::Map(blocks::Sum(blocks::SumOrder::kInOrder));
}

// Tuple(pair state, Sequence(atom state) [a_i, a_j]) -> update(a_i, a_j, pair): the pair's two
// atoms come gathered (GatherLists over the pairs' [i, j] lists), not read by an Nth each.
Block pair_from_ends(const Block& update) {
  Composition c("pair_from_ends");
  auto ends = c.input()[1];
  c.set_output(c.add(
      update, {c.add(blocks::GetItem(0), ends), c.add(blocks::GetItem(1), ends), c.input()[0]}));
  return c;
}

}  // namespace

// Its registry entry: options task (esol | tox21), hidden (64, atom states), pair_hidden (32),
// graph_hidden (128), layers (2), bad_records. Assets: the task names and the ESOL targets'
// standardization (mean, scale).
ModelEntry molecules_entry() {
  ModelEntry entry;
  entry.name = "molecules";
  entry.summary =
      "Weave-style graph convolutions over molecular graphs: --task esol (RMSE) or "
      "tox21 (mean ROC-AUC)";
  entry.input = "a SMILES string, or {\"smiles\": \"...\"}";
  auto size = [](const char* name, std::int64_t value, const char* help) {
    return OptionSpec{.name = name, .default_value = value, .help = help, .min = 1, .max = 65536};
  };
  entry.options = {
      {.name = "task",
       .kind = OptionKind::kString,
       .default_value = "esol",
       .help = "esol (solubility regression, RMSE) or tox21 (12 assays, mean ROC-AUC)",
       .choices = {"esol", "tox21"}},
      size("hidden", 64, "Atom state size"),
      size("pair_hidden", 32, "Atom-pair state size"),
      size("graph_hidden", 128, "Size of the gated sum over atoms"),
      {.name = "layers", .default_value = 2, .help = "Weave layers", .min = 1, .max = 16},
      {.name = "bad_records",
       .kind = OptionKind::kString,
       .default_value = "skip",
       .help = "An unparsable SMILES or a record without labels: skip (and list it) or reject",
       .role = OptionRole::kData,
       .choices = {"skip", "reject"}},
  };
  entry.recipe = [](const OptionValues& options) {
    const bool esol = options.text("task") == "esol";
    return json{{"epochs", esol ? 80 : 20},
                {"batch_size", 32},
                {"optimizer", "adam"},
                {"learning_rate", 0.001},
                {"schedule", "cosine"},  // to 0 over the run; spikes without it
                {"clip_norm", 1.0},
                {"best_metric", esol ? "rmse" : "roc_auc"},
                {"best_mode", esol ? "min" : "max"}};
  };
  entry.create = [](const OptionValues& options, const ModelInit& init) {
    return std::make_unique<MoleculeModel>(options, init);
  };
  return entry;
}

struct MoleculeModel::Impl {
  // The options, read once.
  struct Config {
    std::string data_dir;
    MoleculeTask task = MoleculeTask::kEsol;
    std::int64_t hidden = 0, pair_hidden = 0, graph_hidden = 0, layers = 0;
    io::OnBadRow bad_records = io::OnBadRow::kSkip;
    std::uint64_t seed = 1;
    std::int64_t max_train = 0, max_eval = 0;
  } options;
  std::vector<std::string> tasks, skipped;
  MoleculeSplit train, dev, test;
  float target_mean = 0, target_scale = 1;  // ESOL targets are standardized with train's
  nn::ParameterStore& store;
  std::vector<WeaveWeights> weave;
  std::unique_ptr<nn::FC> gate, gate_value, readout, output;

  Impl(const OptionValues& values, nn::ParameterStore& parameters, const ModelInit& init);
  void read_assets(const json& assets);

  // ---- The model definition ---------------------------------------------------------------

  Function fc_function(const std::string& name, std::int64_t in, const nn::FC& fc) const {
    return Function(name, {Type::vector(in)}, [&fc](std::span<const Var> x) { return fc(x[0]); });
  }

  // Tuple(Sequence(atom), Sequence(pair), Input molecule) -> the same with updated states.
  Block weave_layer(const WeaveWeights& w, const std::string& name, std::int64_t atom_in,
                    std::int64_t pair_in) const {
    const Type atom = Type::vector(atom_in), pair = Type::vector(pair_in);
    // A' = relu(W [relu(W_AA a), sum over the atom's pairs of relu(W_PA p)])
    Function atom_update(name + "/atom", {atom, Type::vector(options.hidden)},
                         [&w](std::span<const Var> x) {
                           return (*w.atom)(concat({(*w.atom_to_atom)(x[0]), x[1]}));
                         });
    // P' = relu(W [f(a_i, a_j) + f(a_j, a_i), relu(W_PP p)]): the same for (j, i) as (i, j).
    Function pair_update(name + "/pair", {atom, atom, pair}, [&w](std::span<const Var> x) {
      Var both = (*w.atom_to_pair)(concat({x[0], x[1]})) + (*w.atom_to_pair)(concat({x[1], x[0]}));
      return (*w.pair)(concat({both, (*w.pair_to_pair)(x[2])}));
    });
    Composition c(name);
    auto atoms = c.input()[0], pairs = c.input()[1], molecule = c.input()[2];
    auto messages =
        c.add(blocks::Map(fc_function(name + "/pair_to_atom", pair_in, *w.pair_to_atom)), pairs);
    auto sums = c.add(sum_per_list(), {messages, c.add(blocks::GetItem("atom_pairs"), molecule)});
    auto new_atoms = c.add(blocks::ZipWith(atom_update), {atoms, sums});
    auto ends =
        c.add(blocks::GatherLists(), {atoms, c.add(blocks::GetItem("pair_atoms"), molecule)});
    auto new_pairs = c.add(blocks::ZipWith(pair_from_ends(pair_update)), {pairs, ends});
    c.set_output({new_atoms, new_pairs, molecule});
    return c;
  }

  Block make_blocks() const {
    Composition model("molecules");
    auto atoms =
        model.add(blocks::GetItem("atoms") >> blocks::Map(blocks::Vector(io::kAtomFeatureSize)),
                  model.input());
    auto pairs =
        model.add(blocks::GetItem("pairs") >> blocks::Map(blocks::Vector(io::kBondFeatureSize)),
                  model.input());
    std::vector<Composition::Wire> state{atoms, pairs, model.input()};
    std::int64_t atom_in = io::kAtomFeatureSize, pair_in = io::kBondFeatureSize;
    for (std::size_t k = 0; k < weave.size(); ++k) {
      const auto next = model.add(
          weave_layer(weave[k], "weave" + std::to_string(k + 1), atom_in, pair_in), state);
      state = {next[0], next[1], next[2]};
      atom_in = options.hidden;
      pair_in = options.pair_hidden;
    }
    // Gated sum over atoms: sum_i sigmoid(W_g a_i) * (W_v a_i); then the final FC.
    Function gated("gated_atom", {Type::vector(atom_in)}, [this](std::span<const Var> x) {
      return sigmoid((*gate)(x[0])) * (*gate_value)(x[0]);
    });
    Function predict("predict", {Type::vector(options.graph_hidden)},
                     [this](std::span<const Var> x) { return (*output)((*readout)(x[0])); });
    model.set_output(model.add(
        blocks::Map(gated) >> blocks::Sum(blocks::SumOrder::kInOrder) >> predict, state[0]));
    return model;
  }

  // ---- Batches ------------------------------------------------------------------------------

  const MoleculeSplit& split(train::Split which) const {
    return which == train::Split::kTrain ? train : (which == train::Split::kDev ? dev : test);
  }

  // The batch's loss terms [examples, tasks], whose sum is its loss: squared error of
  // standardized targets (ESOL), or binary cross-entropy of the labelled tasks (Tox21; missing
  // labels masked out to 0).
  Var loss_terms_of(Var outputs, std::span<const io::MoleculeRecord* const> records) {
    const std::int64_t n = std::int64_t(records.size()), t = std::int64_t(tasks.size());
    std::vector<float> targets, mask;
    for (const io::MoleculeRecord* r : records) {
      for (std::size_t k = 0; k < tasks.size(); ++k) {
        const float y = r->targets[k];
        targets.push_back(options.task == MoleculeTask::kEsol ? (y - target_mean) / target_scale
                                                              : y);
        mask.push_back(r->present[k] ? 1.f : 0.f);
      }
    }
    const Device device = outputs.value().device();
    Var y = outputs.tape().constant(Tensor::from_vector({n, t}, targets).to(device));
    Var m = outputs.tape().constant(Tensor::from_vector({n, t}, mask).to(device));
    if (options.task == MoleculeTask::kEsol) {
      Var error = (outputs - y) * m;
      return error * error;
    }
    // -[y log s(x) + (1-y) log(1-s(x))] = softplus(x) - y x
    return (softplus(outputs) - y * outputs) * m;
  }

  // Scores in the data's units: the solubility, or each task's probability.
  std::vector<double> scores_of(const Var& outputs) const {
    std::vector<double> values;
    for (float v : outputs.value().to_float_vector()) {
      values.push_back(options.task == MoleculeTask::kEsol ? double(v) * target_scale + target_mean
                                                           : 1.0 / (1.0 + std::exp(-double(v))));
    }
    return values;
  }

  void load();
  void keep(std::vector<io::MoleculeRecord>& records, std::vector<json>& graphs);
};

MoleculeModel::Impl::Impl(const OptionValues& values, nn::ParameterStore& parameters,
                          const ModelInit& init)
    : store(parameters) {
  options.data_dir = values.text("data_dir");
  options.task = parse_molecule_task(values.text("task"));
  options.hidden = values.integer("hidden");
  options.pair_hidden = values.integer("pair_hidden");
  options.graph_hidden = values.integer("graph_hidden");
  options.layers = values.integer("layers");
  options.bad_records =
      values.text("bad_records") == "reject" ? io::OnBadRow::kReject : io::OnBadRow::kSkip;
  options.seed = std::uint64_t(values.integer("seed"));
  options.max_train = values.integer("max_train");
  options.max_eval = values.integer("max_eval");
  if (init.use != ModelUse::kInfer) load();
  if (init.assets != nullptr) read_assets(*init.assets);
  if (init.use == ModelUse::kEvaluate) train = MoleculeSplit();
  if (tasks.empty()) fail("molecules", "no tasks to predict");
  const std::int64_t a = options.hidden, p = options.pair_hidden;
  std::int64_t atom_in = io::kAtomFeatureSize, pair_in = io::kBondFeatureSize;
  for (std::int64_t k = 0; k < options.layers; ++k) {
    const std::string s = "weave" + std::to_string(k + 1) + "/";
    WeaveWeights w;
    w.atom_to_atom = std::make_unique<nn::FC>(store, s + "atom_to_atom", atom_in, a);
    w.pair_to_atom = std::make_unique<nn::FC>(store, s + "pair_to_atom", pair_in, a);
    w.atom = std::make_unique<nn::FC>(store, s + "atom", 2 * a, a);
    w.atom_to_pair = std::make_unique<nn::FC>(store, s + "atom_to_pair", 2 * atom_in, p);
    w.pair_to_pair = std::make_unique<nn::FC>(store, s + "pair_to_pair", pair_in, p);
    w.pair = std::make_unique<nn::FC>(store, s + "pair", 2 * p, p);
    weave.push_back(std::move(w));
    atom_in = a;
    pair_in = p;
  }
  const nn::FCOptions linear{.activation = nn::Activation::kNone};
  gate = std::make_unique<nn::FC>(store, "gate", atom_in, options.graph_hidden, linear);
  gate_value = std::make_unique<nn::FC>(store, "gate_value", atom_in, options.graph_hidden, linear);
  readout = std::make_unique<nn::FC>(store, "readout", options.graph_hidden, options.graph_hidden);
  output = std::make_unique<nn::FC>(store, "output", options.graph_hidden,
                                    std::int64_t(tasks.size()), linear);
}

// The tasks and the targets' standardization a checkpoint stored (they replace the data's).
void MoleculeModel::Impl::read_assets(const json& assets) {
  const json names = assets.value("tasks", json());
  if (!names.is_array() || names.empty()) fail("molecules", "the assets hold no task names");
  std::vector<std::string> stored;
  for (const json& name : names) {
    if (!name.is_string()) fail("molecules", "a stored task name is not a string");
    stored.push_back(name.get<std::string>());
  }
  if (!tasks.empty() && tasks != stored) {
    fail("molecules", "the data's tasks differ from the checkpoint's");
  }
  tasks = std::move(stored);
  const json mean = assets.value("target_mean", json()),
             scale = assets.value("target_scale", json());
  if (!mean.is_number() || !scale.is_number() || !std::isfinite(mean.get<double>()) ||
      !(scale.get<double>() > 0) || !std::isfinite(scale.get<double>())) {
    fail("molecules", "the stored target standardization is missing or invalid");
  }
  target_mean = mean.get<float>();
  target_scale = scale.get<float>();
}

void MoleculeModel::Impl::load() {
  if (!io::smiles_parser_available())
    fail("molecules", "this build cannot parse SMILES (it was built without RDKit)");
  const bool esol = options.task == MoleculeTask::kEsol;
  const std::string path =
      options.data_dir + "/molecules/" + (esol ? "delaney-processed.csv" : "tox21.csv");
  const io::MoleculeOptions read{.bad_rows = options.bad_records};
  io::MoleculeDataset data = esol ? io::read_esol(path, read) : io::read_tox21(path, read);
  tasks = data.tasks;
  skipped = data.skipped;
  std::vector<io::MoleculeRecord> records;
  std::vector<json> graphs;
  for (io::MoleculeRecord& record : data.records) {
    std::string why;
    if (std::find(record.present.begin(), record.present.end(), 1) == record.present.end()) {
      why = "no labels (every task is missing)";
    } else {
      try {
        const io::MoleculeGraph graph = io::parse_smiles(record.smiles);
        if (graph.atoms.empty()) fail("smiles", "'", record.smiles, "' has no atoms");
        graphs.push_back(molecule_example(graph));
      } catch (const Error& e) {
        why = e.what();
      }
    }
    if (why.empty()) {
      records.push_back(std::move(record));
      continue;
    }
    const std::string where = path + ":" + std::to_string(record.line) + ": " + why;
    if (options.bad_records == io::OnBadRow::kReject)
      fail("molecules", where, " (--bad-records skip leaves such records out)");
    skipped.push_back(where);
  }
  keep(records, graphs);
}

// Splits the usable records, trims the splits to max_train / max_eval, and standardizes
// regression targets with the training split's mean and deviation.
void MoleculeModel::Impl::keep(std::vector<io::MoleculeRecord>& records,
                               std::vector<json>& graphs) {
  const auto ids = split_by_smiles(records, options.seed);
  MoleculeSplit* splits[3] = {&train, &dev, &test};
  for (std::size_t s = 0; s < 3; ++s) {
    const std::int64_t limit = s == 0 ? options.max_train : options.max_eval;
    for (std::size_t id : ids[s]) {
      if (limit > 0 && std::int64_t(splits[s]->records.size()) >= limit) break;
      splits[s]->records.push_back(records[id]);
      splits[s]->examples.push_back(std::move(graphs[id]));
    }
  }
  if (train.records.empty()) fail("molecules", "no usable training records");
  if (options.task != MoleculeTask::kEsol) return;
  double sum = 0, squares = 0;
  for (const io::MoleculeRecord& r : train.records) sum += r.targets[0];
  const double mean = sum / double(train.records.size());
  for (const io::MoleculeRecord& r : train.records)
    squares += (r.targets[0] - mean) * (r.targets[0] - mean);
  target_mean = float(mean);
  target_scale = float(std::max(1e-6, std::sqrt(squares / double(train.records.size()))));
}

MoleculeModel::MoleculeModel(const OptionValues& options, const ModelInit& init)
    : BlockModel(options, init), impl_(std::make_unique<Impl>(this->options(), store(), init)) {
  Impl& m = *impl_;
  // The graphs move to the base's splits; the records (targets, labels) stay here.
  split_examples(train::Split::kTrain) = std::move(m.train.examples);
  split_examples(train::Split::kDev) = std::move(m.dev.examples);
  split_examples(train::Split::kTest) = std::move(m.test.examples);
  compile(m.make_blocks(), loom::Strategy::kAgenda);  // reaches the lower bound; by_depth does not
}

MoleculeModel::~MoleculeModel() = default;

json MoleculeModel::assets() const {
  return json{{"tasks", impl_->tasks},
              {"target_mean", impl_->target_mean},
              {"target_scale", impl_->target_scale}};
}

std::vector<std::string> MoleculeModel::data_notes() const {
  if (impl_->skipped.empty()) return {};
  std::vector<std::string> notes{fmt::format(
      "molecules: skipped {} bad records (--bad-records skip):", impl_->skipped.size())};
  for (const std::string& record : impl_->skipped) notes.push_back("  " + record);
  return notes;
}

// The loss over the batch; when evaluating, every example's scores (in the data's units) for
// finish_split.
train::BatchFigures MoleculeModel::figures(const blocks::BatchResult& result,
                                           const train::Batch& batch, bool training) {
  Impl& m = *impl_;
  std::vector<const io::MoleculeRecord*> records;
  for (std::size_t id : batch.example_ids) records.push_back(&m.split(batch.split).records[id]);
  const Var outputs = result.output(0);
  const Var terms = m.loss_terms_of(outputs, records);
  const Var loss = sum(terms);
  const float count = float(records.size());
  if (training) loss.tape().backward(loss * (1.f / count));

  train::BatchFigures figures;
  figures.loss_sum = loss.value().item();
  figures.examples = std::int64_t(records.size());
  if (training) return figures;
  figures.loss_terms = terms.value().to_float_vector();  // summed exactly by the trainer
  const std::vector<double> values = m.scores_of(outputs);
  const std::size_t tasks = m.tasks.size();
  for (std::size_t i = 0; i < records.size(); ++i) {
    figures.scores.push_back(
        {batch.example_ids[i],
         std::vector<double>(values.begin() + std::ptrdiff_t(i * tasks),
                             values.begin() + std::ptrdiff_t((i + 1) * tasks))});
  }
  return figures;
}

void MoleculeModel::finish_split(train::Split split, std::span<const train::ExampleScores> scores,
                                 train::MetricSet& figures) const {
  const Impl& m = *impl_;
  MoleculeScores all(m.tasks.size());
  const std::vector<io::MoleculeRecord>& records = m.split(split).records;
  for (const train::ExampleScores& row : scores) {
    if (row.example >= records.size() || row.values.size() != m.tasks.size()) {
      fail("molecules", "scores of example ", row.example, " do not fit the ",
           train::split_name(split), " split");
    }
    all.add(row.values, records[row.example]);
  }
  if (m.options.task == MoleculeTask::kEsol) {
    figures.add_mean("rmse", all.rmse());
  } else {
    figures.add_mean("roc_auc", all.mean_roc_auc());
  }
}

json MoleculeModel::parse_example(std::string_view line, std::string_view where) const {
  // A line is a SMILES string or {"smiles": "..."}; a SMILES never starts with '{'.
  std::string smiles(line);
  if (line.find_first_not_of(" \t") != std::string_view::npos &&
      line[line.find_first_not_of(" \t")] == '{') {
    const json value = io::parse_json(line, where, "molecules");
    if (!value.is_object() || !value.contains("smiles") || !value["smiles"].is_string())
      fail("molecules", where, ": expected {\"smiles\": \"...\"} or a SMILES string");
    smiles = value["smiles"].get<std::string>();
  }
  const auto first = smiles.find_first_not_of(" \t\r");
  const auto last = smiles.find_last_not_of(" \t\r");
  smiles = first == std::string::npos ? "" : smiles.substr(first, last - first + 1);
  try {
    const io::MoleculeGraph graph = io::parse_smiles(smiles);
    if (graph.atoms.empty()) fail("molecules", "'", smiles, "' has no atoms");
    return molecule_example(graph);
  } catch (const Error& e) {
    // Located once: "[molecules] instance 0: what", not "[molecules] instance 0: [molecules] what".
    const std::string_view what = e.what(), own = "[molecules] ";
    fail("molecules", where, ": ", what.starts_with(own) ? what.substr(own.size()) : what);
  }
}

std::vector<json> MoleculeModel::predictions(const blocks::BatchResult& result, std::size_t count) {
  const Impl& m = *impl_;
  const std::vector<double> values = m.scores_of(result.output(0));
  std::vector<json> predictions;
  for (std::size_t i = 0; i < count; ++i) {
    json p = json::object();
    for (std::size_t k = 0; k < m.tasks.size(); ++k) {
      const double v = std::round(values[i * m.tasks.size() + k] * 1e6) / 1e6;
      p[m.options.task == MoleculeTask::kEsol ? "log_solubility" : m.tasks[k]] = v;
    }
    predictions.push_back(std::move(p));
  }
  return predictions;
}

const std::vector<std::string>& MoleculeModel::task_names() const { return impl_->tasks; }

const std::vector<std::string>& MoleculeModel::skipped_records() const { return impl_->skipped; }

std::span<const io::MoleculeRecord> MoleculeModel::records(train::Split split) const {
  return impl_->split(split).records;
}

}  // namespace weft::models
