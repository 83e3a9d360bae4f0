// weft.models: every registered model by name with its own options as keyword arguments
// (weft.models.create("sentiment", hidden=150)), fit / evaluate / predict / save, and loading a
// self-contained checkpoint (weft.models.load(path)). A thin front end over the registry, like
// the command line: no model is special-cased here.
#include "common.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/models/decoding.h"
#include "weft/models/model.h"
#include "weft/models/registry.h"
#include "weft/models/saved_model.h"
#include "weft/train/trainer.h"

namespace weft::python {

train::TrainerOptions trainer_options_from(train::TrainerOptions o, const py::dict& kw,
                                           std::string_view source);
py::list epochs_list(const train::TrainResult& r);

namespace {

using models::Model;

py::object json_to_py(const nlohmann::json& j) { return from_json(j); }

// predict(..., batch_invariant=...): the mode asked for during one call, the previous after.
class BatchInvariantScope {
 public:
  explicit BatchInvariantScope(std::optional<bool> on) : before_(batch_invariant()) {
    if (on) set_batch_invariant(*on);
  }
  ~BatchInvariantScope() {
    if (batch_invariant() != before_) set_batch_invariant(before_);
  }
  BatchInvariantScope(const BatchInvariantScope&) = delete;
  BatchInvariantScope& operator=(const BatchInvariantScope&) = delete;

 private:
  bool before_;
};

nlohmann::json kwargs_json(const py::kwargs& kw) {
  nlohmann::json out = nlohmann::json::object();
  for (auto item : kw) out[py::str(item.first).cast<std::string>()] = to_json(item.second);
  return out;
}

models::ModelUse use_of(const std::string& name) {
  if (name == "infer") return models::ModelUse::kInfer;
  if (name == "evaluate" || name == "eval") return models::ModelUse::kEvaluate;
  if (name == "train") return models::ModelUse::kTrain;
  fail("models", "unknown use '", name, "' (infer, evaluate, train)");
}

train::TrainerOptions recipe_options(const Model& model) {
  return models::find_model(model.options().owner()).training_options(model.options());
}

// One example as `weft infer` reads a line and `weft serve` an instance: a str is the line, any
// other value (a dict, a list, a number) its JSON text ({"number": 3} for the calculator).
nlohmann::json parse_example_of(const Model& model, py::handle example, const std::string& where) {
  if (py::isinstance<py::str>(example)) return model.parse_example(utf8_of(example, where), where);
  return model.parse_example(to_json(example).dump(), where);
}

// The decoding settings of predict(beam=, length_penalty=): the model's own, with what the call
// gives checked by the model's options of those names (the bounds `weft infer` applies too).
std::optional<models::DecodeSettings> decode_settings_of(Model& model, const py::object& beam,
                                                         const py::object& length_penalty) {
  if (beam.is_none() && length_penalty.is_none()) return std::nullopt;
  models::DecodingModel* decoder = model.decoding();
  if (!decoder)
    fail("models", model.name(), " does not decode step by step: beam= and ",
         "length_penalty= apply to models such as tree2seq and seq2tree");
  OptionValues checked = model.options();
  if (!beam.is_none()) checked.set("beam", to_json(beam), "predict(beam=...)");
  if (!length_penalty.is_none())
    checked.set("length_penalty", to_json(length_penalty), "predict(length_penalty=...)");
  models::DecodeSettings settings = decoder->decode_settings();
  settings.beam = int(checked.integer("beam"));
  settings.length_penalty = checked.number("length_penalty");
  return settings;
}

py::list predict(Model& model, py::iterable examples, py::object beam, py::object length_penalty,
                 std::optional<bool> invariant) {
  std::vector<nlohmann::json> in;
  for (py::handle e : examples)
    in.push_back(parse_example_of(model, e, "example " + std::to_string(in.size())));
  const std::optional<models::DecodeSettings> settings =
      decode_settings_of(model, beam, length_penalty);
  std::vector<nlohmann::json> out;
  {
    py::gil_scoped_release nogil;
    const BatchInvariantScope mode(invariant);
    out = settings ? model.decoding()->decode(in, *settings) : model.predict(in);
  }
  py::list result;
  for (const auto& o : out) result.append(from_json(o));
  return result;
}

}  // namespace

void init_models(py::module_& parent) {
  py::module_ m = parent.def_submodule("models", R"doc(
The registered models (the ones `weft train` knows): create(name, **options), load(path).)doc");
  m.def("names", &models::model_names, "The registered models' names.");
  m.def(
      "describe",
      [](const std::string& name) { return json_to_py(models::find_model(name).to_json()); },
      py::arg("name"), "A model's summary, input form, option schema and recipe, as a dict.");

  py::class_<Model, train::TrainableModel>(m, "Model", R"doc(
A registered model: fit(**trainer options) trains it with its recipe and these options of
weft.train.options() on top (epochs, batch_size, learning_rate, optimizer, schedule, checkpoint,
best_checkpoint, log, resume, progress, ...); evaluate(split) gives its figures;
predict(examples) one dict per example (a string as `weft infer` reads a line, any other value
as its JSON text, as `weft serve` reads an instance; beam=k for the models that decode);
save(path) writes a self-contained checkpoint.)doc")
      .def_property_readonly("name", [](const Model& mdl) { return mdl.options().owner(); })
      .def_property_readonly("options",
                             [](const Model& mdl) { return json_to_py(mdl.options().values()); })
      .def_property_readonly("assets", [](const Model& mdl) { return json_to_py(mdl.assets()); })
      .def_property_readonly("recipe",
                             [](const Model& mdl) {
                               const auto& entry = models::find_model(mdl.options().owner());
                               return json_to_py(entry.recipe(mdl.options()));
                             })
      .def_property_readonly("root_block", &Model::root_block,
                             py::return_value_policy::reference_internal)
      .def(
          "num_examples",
          [](const Model& mdl, const std::string& split) {
            return mdl.num_examples(train::parse_split(split));
          },
          py::arg("split") = "train")
      .def(
          "examples",
          [](const Model& mdl, const std::string& split) {
            py::list out;
            for (const auto& e : mdl.examples(train::parse_split(split))) out.append(from_json(e));
            return out;
          },
          py::arg("split") = "train", "A split's examples in the model's Input form.")
      .def(
          "parse_example",
          [](const Model& mdl, const std::string& line) {
            return from_json(mdl.parse_example(line, "parse_example"));
          },
          py::arg("line"))
      .def("predict", &predict, py::arg("examples"), py::arg("beam") = py::none(),
           py::arg("length_penalty") = py::none(), py::arg("batch_invariant") = py::none(),
           "One dict per example, read as `weft infer` and `weft serve` read them (a str is a "
           "line, any other value its JSON text); beam=k (decoding models) searches k beams, 0 "
           "decodes greedily; length_penalty=p ranks beams by log_prob / length^p. Both are "
           "checked against the model's options of the same names (the bounds `weft infer` "
           "applies). batch_invariant=True predicts in the batch-invariant mode "
           "(weft.set_batch_invariant), False outside it, for this call.")
      .def(
          "fit",
          [](Model& mdl, py::kwargs kw) {
            train::TrainerOptions o = trainer_options_from(recipe_options(mdl), kw, "Model.fit");
            train::TrainResult r;
            {
              py::gil_scoped_release nogil;
              train::Trainer trainer(o);
              r = trainer.fit(mdl);
            }
            return epochs_list(r);
          },
          "Trains with the model's recipe and these overrides; one dict per epoch.")
      .def(
          "evaluate",
          [](Model& mdl, const std::string& split, py::kwargs kw) {
            train::TrainerOptions o =
                trainer_options_from(recipe_options(mdl), kw, "Model.evaluate");
            train::MetricSet s;
            {
              py::gil_scoped_release nogil;
              train::Trainer trainer(o);
              s = trainer.evaluate(mdl, train::parse_split(split));
            }
            py::dict out;
            for (const std::string& n : s.names()) out[py::str(n)] = s.value(n);
            return out;
          },
          py::arg("split") = "dev")
      .def(
          "save", [](Model& mdl, const std::string& path) { models::save_model(path, mdl); },
          py::arg("path"));

  m.def(
      "create",
      [](const std::string& name, py::kwargs kw) {
        const models::ModelEntry& entry = models::find_model(name);
        models::OptionValues options = entry.default_options();
        options.update(kwargs_json(kw), "weft.models.create");
        py::gil_scoped_release nogil;
        return models::create_model(options);
      },
      py::arg("name"), R"doc(
Builds a registered model for training with its options as keyword arguments
(weft.models.create("sentiment", hidden=150, data_dir="../shared/data")); unknown options and
out-of-range values raise weft.Error listing what is accepted.)doc");
  m.def(
      "load",
      [](const std::string& path, const std::string& use, py::kwargs kw) {
        nlohmann::json overrides = kwargs_json(kw);
        py::gil_scoped_release nogil;
        return models::load_model(path, use_of(use), overrides);
      },
      py::arg("path"), py::arg("use") = "infer", R"doc(
Rebuilds the model a checkpoint holds: use="infer" (no data needed) or "evaluate" (reads the
data folder, encoded with the checkpoint's vocabulary). Keyword arguments override data and
runtime options; a different architecture option raises.)doc");
}

}  // namespace weft::python
