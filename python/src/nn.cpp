// weft.nn: the parameter store, initializers, and the layers and cells of weft/nn (FC,
// Embedding, LSTM, GRU, the N-ary and Child-Sum Tree-LSTMs), callable on Vars; ForwardMode
// (training: dropout on) as a context manager. Layers hold their store's parameters by handle,
// so they stay valid while the store is alive (each layer keeps its store alive).
#include "common.h"
#include "weft/core/error.h"
#include "weft/nn/cells.h"
#include "weft/nn/embedding.h"
#include "weft/nn/fc.h"
#include "weft/nn/initializers.h"
#include "weft/nn/mode.h"
#include "weft/nn/parameter_store.h"

namespace weft::python {
namespace {

thread_local std::vector<std::unique_ptr<nn::ParameterStore::NameScope>> open_name_scopes;
thread_local std::vector<std::unique_ptr<nn::ForwardMode>> open_modes;

// The TreeLSTM-style cells take an optional x: None is an undefined Var.
Var optional_var(const std::optional<Var>& v) { return v ? *v : Var(); }

}  // namespace

void init_nn(py::module_& parent) {
  py::module_ m = parent.def_submodule("nn", "Parameters, initializers, layers and cells.");
  m.def("zeros", &nn::zeros);
  m.def("constant", &nn::constant, py::arg("value"));
  m.def("uniform", &nn::uniform, py::arg("low"), py::arg("high"));
  m.def("normal", &nn::normal, py::arg("stddev"));
  m.def("truncated_normal", &nn::truncated_normal, py::arg("stddev"));
  m.def("glorot_uniform", &nn::glorot_uniform);
  m.def("uniform_unit_scaling", &nn::uniform_unit_scaling, py::arg("factor") = 1.0f);
  m.def(
      "from_tensor", [](py::handle v) { return nn::from_tensor(as_tensor(v, "float32")); },
      py::arg("value"));

  py::class_<nn::ParameterStore>(m, "ParameterStore", R"doc(
The named parameters of a model, in creation order, with the Rng their initializers draw from
and name scopes: `with store.scope("tree_lstm"): fc = FC(store, "fc", 3, 4)` names
"tree_lstm/fc/weight".)doc")
      .def(py::init<std::uint64_t>(), py::arg("seed") = 0)
      .def(
          "create",
          [](nn::ParameterStore& s, const std::string& name, std::vector<std::int64_t> shape,
             std::optional<nn::Initializer> init, bool trainable) {
            return s.create(name, Shape(std::span<const std::int64_t>(shape)),
                            init ? *init : nn::Initializer{}, trainable);
          },
          py::arg("name"), py::arg("shape"), py::arg("init") = py::none(),
          py::arg("trainable") = true)
      .def("get", &nn::ParameterStore::get)
      .def("__contains__", &nn::ParameterStore::contains)
      .def("__len__", &nn::ParameterStore::size)
      .def_property_readonly("parameters", &nn::ParameterStore::parameters)
      .def("trainable_parameters", &nn::ParameterStore::trainable_parameters)
      .def("zero_grad", &nn::ParameterStore::zero_grad)
      .def("num_elements", &nn::ParameterStore::num_elements)
      .def("_push_scope",
           [](nn::ParameterStore& s, const std::string& prefix) {
             open_name_scopes.push_back(
                 std::make_unique<nn::ParameterStore::NameScope>(s.scope(prefix)));
           })
      .def("_pop_scope", [](nn::ParameterStore&) {
        if (!open_name_scopes.empty()) open_name_scopes.pop_back();
      });

  m.def("mode_dropout", &nn::mode_dropout, py::arg("x"), py::arg("drop_prob"),
        "Dropout when a training forward_mode is active (the Trainer's train batches), else x.");
  m.def("is_training", &nn::is_training);
  m.def(
      "dropout_mask",
      [](std::vector<std::int64_t> shape, float drop_prob) -> py::object {
        if (!nn::is_training() || drop_prob == 0.0f) return py::none();
        Tape scratch;  // the mask is what mode_dropout multiplies by: its draw, from ones
        const Var ones =
            scratch.constant(Tensor::full(Shape(std::span<const std::int64_t>(shape)), 1.0f));
        return py::cast(nn::mode_dropout(ones, drop_prob).value());
      },
      py::arg("shape"), py::arg("drop_prob"),
      "The mask mode_dropout would multiply a value of this shape by (0 or 1 / (1 - drop_prob), "
      "drawn from the forward mode's Rng, as the draw of Weft's own dropout at that point), or "
      "None outside a training forward_mode or when drop_prob is 0. For torch bodies whose "
      "dropout should draw as Weft's layers do (weft.torch.WeftDropout).");
  m.def(
      "_push_mode",
      [](bool training, Rng* rng) {
        open_modes.push_back(std::make_unique<nn::ForwardMode>(training, rng));
      },
      // No keep_alive: weft.forward_mode's generator holds the Rng for the mode's extent (a
      // keep_alive on a free function would tie it to `training`, a bool, and fail).
      py::arg("training"), py::arg("rng") = nullptr);
  m.def("_pop_mode", [] {
    if (!open_modes.empty()) open_modes.pop_back();
  });

  py::class_<nn::FCOptions>(m, "FCOptions")
      .def(py::init([](const std::string& activation, float input_dropout, float output_dropout,
                       std::optional<nn::Initializer> weight_init,
                       std::optional<nn::Initializer> bias_init) {
             nn::FCOptions o;
             o.activation = nn::parse_activation(activation);
             o.input_dropout = input_dropout;
             o.output_dropout = output_dropout;
             if (weight_init) o.weight_init = *weight_init;
             if (bias_init) o.bias_init = *bias_init;
             return o;
           }),
           py::arg("activation") = "relu", py::arg("input_dropout") = 0.f,
           py::arg("output_dropout") = 0.f, py::arg("weight_init") = py::none(),
           py::arg("bias_init") = py::none());
  py::class_<nn::FC>(m, "FC",
                     "y = act(x @ W + b), TF Fold's td.FC; activation relu/tanh/sigmoid/none.")
      .def(py::init([](nn::ParameterStore& s, const std::string& name, std::int64_t in,
                       std::int64_t out, const std::string& activation, float input_dropout,
                       float output_dropout) {
             nn::FCOptions o;
             o.activation = nn::parse_activation(activation);
             o.input_dropout = input_dropout;
             o.output_dropout = output_dropout;
             return nn::FC(s, name, in, out, o);
           }),
           py::arg("store"), py::arg("name"), py::arg("in_features"), py::arg("out_features"),
           py::arg("activation") = "relu", py::arg("input_dropout") = 0.f,
           py::arg("output_dropout") = 0.f, py::keep_alive<1, 2>())
      .def("__call__", &nn::FC::operator())
      .def_property_readonly("weight", &nn::FC::weight)
      .def_property_readonly("bias", &nn::FC::bias)
      .def_property_readonly("name", &nn::FC::name)
      .def_property_readonly("parameters", &nn::FC::parameters);
  py::class_<nn::Embedding>(m, "Embedding", "A table of learned vectors looked up by int32 id.")
      .def(py::init([](nn::ParameterStore& s, const std::string& name, std::int64_t buckets,
                       std::int64_t dim, bool trainable, bool mod_inputs,
                       std::optional<nn::Initializer> init, bool sparse_gradient) {
             nn::EmbeddingOptions o;
             o.trainable = trainable;
             o.mod_inputs = mod_inputs;
             o.sparse_gradient = sparse_gradient;
             if (init) o.init = *init;
             return nn::Embedding(s, name, buckets, dim, o);
           }),
           py::arg("store"), py::arg("name"), py::arg("num_buckets"), py::arg("dim"),
           py::arg("trainable") = true, py::arg("mod_inputs") = true, py::arg("init") = py::none(),
           py::arg("sparse_gradient") = false, py::keep_alive<1, 2>())
      .def("__call__",
           [](const nn::Embedding& e, py::handle ids) {
             if (py::isinstance<Var>(ids)) return e(ids.cast<Var>());
             return e(as_tensor(ids, "int32"));
           })
      .def_property_readonly("table", py::overload_cast<>(&nn::Embedding::table, py::const_))
      .def("set_table",
           [](nn::Embedding& e, py::handle v) { e.set_table(as_tensor(v, "float32")); })
      .def_property_readonly("parameters", &nn::Embedding::parameters);

  auto cell_options = [](float forget_bias, float recurrent_dropout) {
    nn::CellOptions o;
    o.forget_bias = forget_bias;
    o.recurrent_dropout = recurrent_dropout;
    return o;
  };
  py::class_<nn::LSTMCell>(m, "LSTMCell", "(x, h, c) -> (h', c').")
      .def(py::init([cell_options](nn::ParameterStore& s, const std::string& name, std::int64_t in,
                                   std::int64_t hidden, float fb, float rd) {
             return nn::LSTMCell(s, name, in, hidden, cell_options(fb, rd));
           }),
           py::arg("store"), py::arg("name"), py::arg("input_size"), py::arg("hidden"),
           py::arg("forget_bias") = 1.f, py::arg("recurrent_dropout") = 0.f, py::keep_alive<1, 2>())
      .def("__call__", [](const nn::LSTMCell& c, std::optional<Var> x, Var h,
                          Var cc) { return c(optional_var(x), h, cc); })
      .def_property_readonly("parameters", &nn::LSTMCell::parameters);
  py::class_<nn::GRUCell>(m, "GRUCell", "(x, h) -> h'.")
      .def(py::init([cell_options](nn::ParameterStore& s, const std::string& name, std::int64_t in,
                                   std::int64_t hidden, float fb, float rd) {
             return nn::GRUCell(s, name, in, hidden, cell_options(fb, rd));
           }),
           py::arg("store"), py::arg("name"), py::arg("input_size"), py::arg("hidden"),
           py::arg("forget_bias") = 1.f, py::arg("recurrent_dropout") = 0.f, py::keep_alive<1, 2>())
      .def("__call__",
           [](const nn::GRUCell& c, std::optional<Var> x, Var h) { return c(optional_var(x), h); })
      .def_property_readonly("parameters", &nn::GRUCell::parameters);
  py::class_<nn::NaryTreeLSTMCell>(
      m, "NaryTreeLSTMCell", "The N-ary Tree-LSTM (Tai et al. 2015): (x, [h_k], [c_k]) -> (h, c).")
      .def(py::init([cell_options](nn::ParameterStore& s, const std::string& name, std::int64_t in,
                                   std::int64_t hidden, int arity, float fb, float rd) {
             return nn::NaryTreeLSTMCell(s, name, in, hidden, arity, cell_options(fb, rd));
           }),
           py::arg("store"), py::arg("name"), py::arg("input_size"), py::arg("hidden"),
           py::arg("arity") = 2, py::arg("forget_bias") = 1.f, py::arg("recurrent_dropout") = 0.f,
           py::keep_alive<1, 2>())
      .def("__call__",
           [](const nn::NaryTreeLSTMCell& c, std::optional<Var> x, std::vector<Var> h,
              std::vector<Var> cc) {
             return c(optional_var(x), std::span<const Var>(h), std::span<const Var>(cc));
           })
      .def_property_readonly("parameters", &nn::NaryTreeLSTMCell::parameters);
  py::class_<nn::ChildSumTreeLSTMCell>(m, "ChildSumTreeLSTMCell",
                                       "The Child-Sum Tree-LSTM in two batched pieces.")
      .def(py::init([cell_options](nn::ParameterStore& s, const std::string& name, std::int64_t in,
                                   std::int64_t hidden, float fb, float rd) {
             return nn::ChildSumTreeLSTMCell(s, name, in, hidden, cell_options(fb, rd));
           }),
           py::arg("store"), py::arg("name"), py::arg("input_size"), py::arg("hidden"),
           py::arg("forget_bias") = 1.f, py::arg("recurrent_dropout") = 0.f, py::keep_alive<1, 2>())
      .def("forget_times_cell", [](const nn::ChildSumTreeLSTMCell& c, std::optional<Var> x, Var h,
                                   Var cc) { return c.forget_times_cell(optional_var(x), h, cc); })
      .def("node", [](const nn::ChildSumTreeLSTMCell& c, std::optional<Var> x, Var hs, Var fcs) {
        return c.node(optional_var(x), hs, fcs);
      });
}

}  // namespace weft::python
