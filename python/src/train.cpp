// weft.train: optimizers, learning-rate schedules, gradient clipping, metrics, and the Trainer
// (progress bar, JSON-lines log, checkpoints, resume) over a TrainableModel, which a Python class
// may implement (parameters, num_examples, train_batch, eval_batch). The Trainer runs without
// the GIL; the Python model's methods take it for their own calls.
#include <array>
#include <cmath>

#include "common.h"
#include "weft/backend/cpu.h"
#include "weft/blocks/compiler.h"
#include "weft/core/error.h"
#include "weft/nn/mode.h"
#include "weft/train/metrics.h"
#include "weft/train/optimizer.h"
#include "weft/train/schedule.h"
#include "weft/train/trainer.h"

namespace weft::python {
namespace {

using namespace weft::train;

// A TrainableModel implemented in Python (subclass weft.train.TrainableModel).
class PyTrainableModel : public TrainableModel {
 public:
  std::string name() const override { PYBIND11_OVERRIDE(std::string, TrainableModel, name); }
  std::string config_json() const override {
    PYBIND11_OVERRIDE(std::string, TrainableModel, config_json);
  }
  std::vector<Parameter> parameters() override {
    PYBIND11_OVERRIDE_PURE(std::vector<Parameter>, TrainableModel, parameters);
  }
  std::size_t num_examples(Split split) const override {
    PYBIND11_OVERRIDE_PURE(std::size_t, TrainableModel, num_examples, split);
  }
  BatchFigures train_batch(const Batch& batch, Rng& rng) override {
    PYBIND11_OVERRIDE_PURE(BatchFigures, TrainableModel, train_batch, batch, &rng);
  }
  BatchFigures eval_batch(const Batch& batch) override {
    PYBIND11_OVERRIDE_PURE(BatchFigures, TrainableModel, eval_batch, batch);
  }
};

// A model made of a compiled root block and Python-side figures: weaving (prepare_batch, on
// the Trainer's background thread) and running stay in C++; only `figures(result, training)`
// (the loss and its backward, the metrics) is Python, once per batch.
class BlocksModel : public TrainableModel {
 public:
  BlocksModel(const blocks::Compiler& compiler, std::vector<Parameter> parameters,
              py::function figures, std::array<std::vector<nlohmann::json>, 3> splits,
              std::string name)
      : compiler_(compiler),
        parameters_(std::move(parameters)),
        figures_(std::make_shared<PyCallable>(std::move(figures))),
        splits_(std::move(splits)),
        name_(std::move(name)) {}

  std::string name() const override { return name_; }
  std::vector<Parameter> parameters() override { return parameters_; }
  std::size_t num_examples(Split split) const override {
    return splits_[std::size_t(split)].size();
  }
  std::unique_ptr<PreparedBatch> prepare_batch(Split split,
                                               std::span<const std::size_t> ids) override {
    auto prepared = std::make_unique<Prepared>();
    prepared->woven = weave(split, ids);
    return prepared;
  }
  BatchFigures train_batch(const Batch& batch, Rng& rng) override { return run(batch, true, &rng); }
  BatchFigures eval_batch(const Batch& batch) override { return run(batch, false, nullptr); }

 private:
  struct Prepared : PreparedBatch {
    blocks::WovenBatch woven;
  };
  blocks::WovenBatch weave(Split split, std::span<const std::size_t> ids) const {
    return compiler_.weave(splits_[std::size_t(split)], ids);
  }
  BatchFigures run(const Batch& batch, bool training, Rng* rng) {
    const blocks::WovenBatch* woven = nullptr;
    if (auto* prepared = dynamic_cast<Prepared*>(batch.prepared)) {
      woven = &prepared->woven;
    } else {
      local_ = weave(batch.split, batch.example_ids);
      woven = &local_;
    }
    tape_.clear();
    tape_.set_grad_enabled(training);
    TapeScope scope(tape_);
    nn::ForwardMode mode(training, rng);
    blocks::BatchResult result = compiler_.run(*woven, tape_);
    py::gil_scoped_acquire gil;
    py::object out =
        figures_->fn()(py::cast(&result, py::return_value_policy::reference), training);
    return out.cast<BatchFigures>();
  }

  const blocks::Compiler& compiler_;
  std::vector<Parameter> parameters_;
  PyCallablePtr figures_;
  std::array<std::vector<nlohmann::json>, 3> splits_;
  std::string name_;
  Tape tape_;
  blocks::WovenBatch local_;
};

std::vector<nlohmann::json> examples_of(py::handle examples) {
  std::vector<nlohmann::json> out;
  if (examples.is_none()) return out;
  for (py::handle e : examples) out.push_back(to_json(e));
  return out;
}

py::dict metrics_dict(const MetricSet& set) {
  py::dict out;
  for (const std::string& n : set.names()) out[py::str(n)] = set.value(n);
  return out;
}

// An optimizer made from Python, with the learning rate its step() takes when given none (lr=,
// as PyTorch's optimizers take it; None: step() needs one).
py::object optimizer_with_rate(const OptimizerSpec& spec, std::span<const Parameter> parameters,
                               std::optional<double> lr) {
  if (lr && !(std::isfinite(*lr) && *lr >= 0))
    fail("optimizer", "lr must be a finite number >= 0, got ", *lr);
  py::object out = py::cast(make_optimizer(spec, parameters));
  out.attr("lr") = lr ? py::object(py::float_(*lr)) : py::object(py::none());
  return out;
}

// Optimizer.step(learning_rate=None): the rate given, else the optimizer's lr.
void step_at(py::object self, std::optional<double> learning_rate) {
  if (!learning_rate) {
    const py::object lr = py::getattr(self, "lr", py::none());
    if (lr.is_none())
      fail("Optimizer.step",
           "no learning rate: pass one, step(0.01), or make the optimizer with "
           "lr=, e.g. weft.train.SGD(parameters, lr=0.01)");
    learning_rate = lr.cast<double>();
  }
  self.cast<Optimizer&>().step(*learning_rate);
}

py::dict epoch_dict(const EpochRecord& r) {
  return py::module_::import("json").attr("loads")(r.to_json());
}

// optimizer=OptimizerSpec(...) as the Trainer's options it stands for (optimizer, momentum,
// beta1, ...; one learning-rate scale as embedding_prefix / embedding_lr_scale).
nlohmann::json options_of_spec(const OptimizerSpec& spec, std::string_view source) {
  nlohmann::json out = {{"optimizer", optimizer_kind_name(spec.kind)},
                        {"momentum", spec.momentum},
                        {"nesterov", spec.nesterov},
                        {"initial_accumulator", spec.initial_accumulator},
                        {"beta1", spec.beta1},
                        {"beta2", spec.beta2},
                        {"epsilon", spec.epsilon},
                        {"weight_decay", spec.weight_decay},
                        {"weight_decay_mode", weight_decay_mode_name(spec.weight_decay_mode)},
                        {"sparse_updates", sparse_update_name(spec.sparse_update)}};
  if (spec.learning_rate_scales.size() > 1)
    fail(source, "optimizer=OptimizerSpec(...) has ", spec.learning_rate_scales.size(),
         " learning_rate_scales; the Trainer takes one (embedding_prefix, embedding_lr_scale)");
  if (!spec.learning_rate_scales.empty()) {
    out["embedding_prefix"] = spec.learning_rate_scales[0].first;
    out["embedding_lr_scale"] = spec.learning_rate_scales[0].second;
  }
  return out;
}

}  // namespace

// The keyword arguments over `o`: each names an option of the Trainer's schema
// (weft/train/trainer_options.h) and is checked by it, as the command line's flags are;
// optimizer= takes a rule's name or an OptimizerSpec (its fields, which no keyword may repeat).
TrainerOptions trainer_options_from(TrainerOptions o, const py::dict& kw, std::string_view source) {
  nlohmann::json given = nlohmann::json::object();
  for (auto item : kw) {
    const std::string name = py::str(item.first).cast<std::string>();
    if (name != "optimizer" || !py::isinstance<OptimizerSpec>(item.second))
      given[name] = to_json(item.second);
  }
  if (kw.contains("optimizer") && py::isinstance<OptimizerSpec>(kw["optimizer"])) {
    const nlohmann::json spec =
        options_of_spec(kw["optimizer"].cast<const OptimizerSpec&>(), source);
    for (const auto& [name, value] : spec.items()) {
      if (given.contains(name))
        fail(source, "'", name, "' is given both by optimizer=OptimizerSpec(...) and as a keyword");
      given[name] = value;
    }
  }
  o.update(given, source);
  // Ctrl-C: Python only notes a signal while C++ runs; between steps the fit takes the GIL and
  // runs the handlers, so KeyboardInterrupt ends it within one step (the last epoch's
  // checkpoint, written atomically, stays as it was).
  o.on_step = [](std::int64_t, double, double) {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  };
  o.validate();
  return o;
}

py::list epochs_list(const TrainResult& r) {
  py::list out;
  for (const EpochRecord& e : r.epochs) out.append(epoch_dict(e));
  return out;
}

void init_train(py::module_& parent) {
  py::module_ m = parent.def_submodule("train", "Optimizers, schedules, metrics and the Trainer.");
  m.def("set_num_threads", &weft::set_num_threads, py::arg("threads"),
        "CPU threads for GEMM (OpenBLAS, OpenMP).");
  m.def("num_threads", &weft::num_threads);

  py::enum_<Split>(m, "Split")
      .value("train", Split::kTrain)
      .value("dev", Split::kDev)
      .value("test", Split::kTest);
  m.def("split", [](const std::string& name) { return parse_split(name); });
  m.def(
      "epoch_order",
      [](std::int64_t n, std::int64_t seed, std::int64_t epoch) {
        if (n < 0 || seed < 0 || epoch < 1)
          fail("epoch_order", "needs n >= 0, seed >= 0 and epoch >= 1, got n = ", n,
               ", seed = ", seed, ", epoch = ", epoch);
        return epoch_order(std::size_t(n), std::uint64_t(seed), epoch);
      },
      py::arg("n"), py::arg("seed"), py::arg("epoch"),
      "The order in which the Trainer (weft train, Model.fit) visits n training examples in "
      "epoch `epoch` (1-based) with this seed: its batches are consecutive slices of it.");

  py::class_<OptimizerSpec>(m, "OptimizerSpec",
                            "sgd (momentum, nesterov), adagrad or adam, with weight decay.")
      .def(py::init([](const std::string& kind, double momentum, bool nesterov,
                       double initial_accumulator, double beta1, double beta2, double epsilon,
                       double weight_decay, const std::string& decay_mode,
                       std::vector<std::pair<std::string, double>> scales,
                       const std::string& sparse_update) {
             OptimizerSpec s;
             s.kind = parse_optimizer_kind(kind);
             s.momentum = momentum;
             s.nesterov = nesterov;
             s.initial_accumulator = initial_accumulator;
             s.beta1 = beta1;
             s.beta2 = beta2;
             s.epsilon = epsilon;
             s.weight_decay = weight_decay;
             s.weight_decay_mode = parse_weight_decay_mode(decay_mode);
             s.learning_rate_scales = std::move(scales);
             s.sparse_update = parse_sparse_update(sparse_update);
             s.validate();
             return s;
           }),
           py::arg("kind") = "sgd", py::arg("momentum") = 0.0, py::arg("nesterov") = false,
           py::arg("initial_accumulator") = 0.0, py::arg("beta1") = 0.9, py::arg("beta2") = 0.999,
           py::arg("epsilon") = 1e-8, py::arg("weight_decay") = 0.0,
           py::arg("weight_decay_mode") = "l2",
           py::arg("learning_rate_scales") = std::vector<std::pair<std::string, double>>{},
           py::arg("sparse_update") = "lazy")
      .def_property_readonly(
          "kind", [](const OptimizerSpec& s) { return std::string(optimizer_kind_name(s.kind)); })
      .def("__repr__", &OptimizerSpec::describe);
  py::class_<Optimizer>(m, "Optimizer", py::dynamic_attr(), R"doc(
Updates parameters from their accumulated gradients: step(learning_rate), or step() with the rate
given to the constructor (lr=, kept in .lr). Gradients add up over backward calls until
zero_grad().)doc")
      .def("step", &step_at, py::arg("learning_rate") = py::none())
      .def("zero_grad", &Optimizer::zero_grad)
      .def_property_readonly("steps", &Optimizer::steps)
      .def_property_readonly("parameters", &Optimizer::parameters)
      .def_property_readonly("slot_names", &Optimizer::slot_names)
      .def(
          "update_tensor",
          [](const Optimizer& o, double learning_rate, std::int64_t step, Tensor value,
             const Tensor& grad, std::optional<Tensor> indices, std::vector<Tensor> slots) {
            o.update_tensor(learning_rate, step, value, grad, indices ? *indices : Tensor(), slots);
          },
          py::arg("learning_rate"), py::arg("step"), py::arg("value"), py::arg("grad"),
          py::arg("indices"), py::arg("slots"),
          "This rule applied to tensors held elsewhere (weft.torch.Adam): value (updated in "
          "place) by a dense grad, or, with indices (int32 [k], sorted, distinct), lazily by the "
          "rows grad at indices; slots as slot_names, each of value's shape; step from 1.")
      .def("state", [](const Optimizer& o) {
        py::dict out;
        for (const auto& [k, v] : o.state()) out[py::str(k)] = v;
        return out;
      });
  m.def(
      "make_optimizer",
      [](const OptimizerSpec& s, std::vector<Parameter> params, std::optional<double> lr) {
        return optimizer_with_rate(s, params, lr);
      },
      py::arg("spec"), py::arg("parameters"), py::arg("lr") = py::none());
  m.def(
      "SGD",
      [](std::vector<Parameter> params, std::optional<double> lr, double momentum, bool nesterov,
         double wd) {
        OptimizerSpec s;
        s.momentum = momentum;
        s.nesterov = nesterov;
        s.weight_decay = wd;
        return optimizer_with_rate(s, params, lr);
      },
      py::arg("parameters"), py::arg("lr") = py::none(), py::arg("momentum") = 0.0,
      py::arg("nesterov") = false, py::arg("weight_decay") = 0.0);
  m.def(
      "Adam",
      [](std::vector<Parameter> params, std::optional<double> lr, double b1, double b2, double eps,
         double wd) {
        OptimizerSpec s;
        s.kind = OptimizerKind::kAdam;
        s.beta1 = b1;
        s.beta2 = b2;
        s.epsilon = eps;
        s.weight_decay = wd;
        return optimizer_with_rate(s, params, lr);
      },
      py::arg("parameters"), py::arg("lr") = 0.001, py::arg("beta1") = 0.9,
      py::arg("beta2") = 0.999, py::arg("epsilon") = 1e-8, py::arg("weight_decay") = 0.0);
  m.def(
      "Adagrad",
      [](std::vector<Parameter> params, std::optional<double> lr, double init, double eps) {
        OptimizerSpec s;
        s.kind = OptimizerKind::kAdagrad;
        s.initial_accumulator = init;
        s.epsilon = eps;
        return optimizer_with_rate(s, params, lr);
      },
      py::arg("parameters"), py::arg("lr") = 0.01, py::arg("initial_accumulator") = 0.1,
      py::arg("epsilon") = 1e-8);
  m.def("grad_norm", [](std::vector<Parameter> p) { return grad_norm(p); });
  m.def(
      "clip_grad_norm", [](std::vector<Parameter> p, double n) { return clip_grad_norm(p, n); },
      py::arg("parameters"), py::arg("max_norm"));
  m.def(
      "clip_grad_value", [](std::vector<Parameter> p, double l) { clip_grad_value(p, l); },
      py::arg("parameters"), py::arg("limit"));

  py::class_<LrSchedule>(m, "LrSchedule",
                         "constant, step, exponential or cosine, with linear warm-up.")
      .def(py::init([](const std::string& kind, double lr, std::int64_t warmup, double gamma,
                       std::int64_t step_size, std::int64_t total, double min_lr) {
             LrSchedule s;
             s.kind = parse_schedule_kind(kind);
             s.learning_rate = lr;
             s.warmup_steps = warmup;
             s.gamma = gamma;
             s.step_size = step_size;
             s.total_steps = total;
             s.min_lr = min_lr;
             s.validate();
             return s;
           }),
           py::arg("kind") = "constant", py::arg("learning_rate") = 0.01,
           py::arg("warmup_steps") = 0, py::arg("gamma") = 0.1, py::arg("step_size") = 1,
           py::arg("total_steps") = 0, py::arg("min_lr") = 0.0)
      .def("__call__", &LrSchedule::at, py::arg("step"))
      .def("at", &LrSchedule::at, py::arg("step"))
      .def("__repr__", &LrSchedule::describe);

  py::class_<MetricSet>(m, "MetricSet", "Named figures: means (loss) and hit rates (accuracy).")
      .def(py::init<>())
      .def("add_mean", &MetricSet::add_mean, py::arg("name"), py::arg("value"),
           py::arg("weight") = 1.0)
      .def("add_hits", &MetricSet::add_hits, py::arg("name"), py::arg("hits"), py::arg("total"))
      .def("value", &MetricSet::value)
      .def("names", &MetricSet::names)
      .def("to_dict", &metrics_dict);
  py::class_<BatchFigures>(m, "BatchFigures", R"doc(
What a batch contributes: loss_sum (the SUM of its examples' losses), examples, and metrics
(add_hits("accuracy", hits, total), ...). loss_terms, when set, lists the terms (each
example's or row's loss) whose float sum loss_sum is: evaluation sums them exactly instead, so
its loss does not depend on the batch size.)doc")
      .def(py::init([](double loss_sum, std::int64_t examples, std::optional<py::dict> hits) {
             BatchFigures f;
             f.loss_sum = loss_sum;
             f.examples = examples;
             if (hits)
               for (auto item : *hits) {
                 auto ht = item.second.cast<std::pair<std::int64_t, std::int64_t>>();
                 f.metrics.add_hits(py::str(item.first), ht.first, ht.second);
               }
             return f;
           }),
           py::arg("loss_sum") = 0.0, py::arg("examples") = 0, py::arg("hits") = py::none(),
           "hits: {name: (hits, total)}")
      .def_readwrite("loss_sum", &BatchFigures::loss_sum)
      .def_readwrite("examples", &BatchFigures::examples)
      .def_readwrite("loss_terms", &BatchFigures::loss_terms)
      .def_readwrite("metrics", &BatchFigures::metrics);
  m.def("argmax_hits", [](py::handle logits, py::handle labels) {
    return argmax_hits(as_tensor(logits, "float32"), as_tensor(labels, "int32"));
  });
  py::class_<Batch>(m, "Batch")
      .def_readonly("split", &Batch::split)
      .def_property_readonly("example_ids", [](const Batch& b) {
        return std::vector<std::size_t>(b.example_ids.begin(), b.example_ids.end());
      });

  py::class_<TrainableModel, PyTrainableModel>(m, "TrainableModel", R"doc(
Subclass to train your own model with the Trainer: parameters() -> [Parameter];
num_examples(split) -> int; train_batch(batch, rng) -> BatchFigures (forward, and backward of
the batch's MEAN loss; no update); eval_batch(batch) -> BatchFigures. batch.example_ids are
indices into the split.)doc")
      .def(py::init<>())
      .def("name", &TrainableModel::name)
      .def("parameters", &TrainableModel::parameters)
      .def("num_examples", &TrainableModel::num_examples);

  py::class_<BlocksModel, TrainableModel>(m, "BlocksModel", R"doc(
BlocksModel(compiler, parameters, figures, train=[...], dev=[...], test=[...], name="model"):
a TrainableModel from a compiled root block. The Trainer weaves the next batch in C++ on a
background thread while this one trains; per batch, Python runs only
figures(result, training) -> BatchFigures, which computes the loss from the BatchResult's
outputs / metrics and, when training, calls backward on the batch's MEAN loss.)doc")
      .def(py::init([](const blocks::Compiler& c, std::vector<Parameter> params,
                       py::function figures, py::object train, py::object dev, py::object test,
                       std::string name) {
             return std::make_unique<BlocksModel>(
                 c, std::move(params), std::move(figures),
                 std::array<std::vector<nlohmann::json>, 3>{examples_of(train), examples_of(dev),
                                                            examples_of(test)},
                 std::move(name));
           }),
           py::arg("compiler"), py::arg("parameters"), py::arg("figures"),
           py::arg("train") = py::none(), py::arg("dev") = py::none(), py::arg("test") = py::none(),
           py::arg("name") = "model", py::keep_alive<1, 2>());

  m.def(
      "options",
      [] {
        py::list out;
        for (const OptionSpec& spec : trainer_option_schema())
          out.append(from_json(spec.to_json()));
        return out;
      },
      "The Trainer's options (name, kind, default, help, range or choices), as `weft train "
      "<model> --help` lists them.");
  py::class_<Trainer>(m, "Trainer", R"doc(
Trainer(**options): each keyword is an option of weft.train.options() (epochs=10, batch_size=32,
optimizer="sgd"|"adagrad"|"adam", learning_rate=0.01, schedule="constant"|..., clip_norm=0,
average_weights=0 (weight averaging), best_metric="", checkpoint="", best_checkpoint="",
resume="", log="", progress="auto"|"bar"|"lines"|"off", seed=0, threads=0, ...); an unknown
name or a bad value raises weft.Error. fit(model) returns one dict per epoch (the JSON-lines
log's records); evaluate(model, "dev") a dict of figures.)doc")
      .def(py::init([](py::kwargs kw) {
        return std::make_unique<Trainer>(trainer_options_from({}, kw, "weft.train.Trainer"));
      }))
      .def(
          "fit",
          [](Trainer& t, TrainableModel& model) {
            TrainResult r;
            {
              py::gil_scoped_release nogil;
              r = t.fit(model);
            }
            return epochs_list(r);
          },
          py::arg("model"))
      .def(
          "evaluate",
          [](Trainer& t, TrainableModel& model, const std::string& split) {
            MetricSet s;
            {
              py::gil_scoped_release nogil;
              s = t.evaluate(model, parse_split(split));
            }
            return metrics_dict(s);
          },
          py::arg("model"), py::arg("split") = "dev")
      .def_property_readonly("optimizer", &Trainer::optimizer,
                             py::return_value_policy::reference_internal);
}

}  // namespace weft::python
