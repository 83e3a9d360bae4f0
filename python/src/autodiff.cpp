// Autodiff from Python: Tape (a context manager making it the thread's current tape), Var (with
// Python operators), Parameter, Rng and every op of ops.def as a module function. Index
// arguments (gather_rows, labels, segment ids) take a Tensor, a Var's value or any int array-like.
#include <vector>

#include "common.h"
#include "weft/autodiff/ops.h"
#include "weft/core/error.h"
#include "weft/core/rng.h"

namespace weft::python {
namespace {

// The TapeScopes opened by `with tape:` on this thread, innermost last.
thread_local std::vector<std::unique_ptr<TapeScope>> open_scopes;

weft::Tensor index_tensor(py::handle value) {
  if (py::isinstance<Var>(value)) return value.cast<Var>().value();
  return as_tensor(value, "int32");
}

py::object grad_or_none(const weft::Tensor& grad) {
  if (!grad.defined()) return py::none();
  return py::cast(grad);
}

Var check(const Var& v, const char* op) {
  if (!v.defined()) fail(op, "the Var is undefined");
  return v;
}

constexpr const char* kGenerationAttr = "_tape_generation";

// The value of a new Parameter: shared with a float32 Tensor or NumPy array, copied from a
// plain Python number or sequence, refused (naming why) for anything a copy would silently
// detach from the caller's array.
weft::Tensor parameter_value(const std::string& name, py::handle value) {
  const std::string where = "Parameter '" + name + "'";
  if (value.is_none()) fail(where, "the value is None; give an array, a Tensor or numbers");
  if (py::isinstance<weft::Tensor>(value)) {
    weft::Tensor t = value.cast<weft::Tensor>();
    if (t.dtype() != DType::kFloat32)
      fail(where, "parameters are float32, got a ", t.describe(), " (use weft.cast first)");
    return t;
  }
  if (py::isinstance<py::array>(value)) {
    const py::array a = py::cast<py::array>(value);
    const std::string shape = py::str(a.attr("shape")).cast<std::string>();
    if (a.dtype().kind() != 'f' || a.dtype().attr("itemsize").cast<int>() != 4)  // NumPy 2-safe
      fail(where, "the array is ", py::str(a.dtype()).cast<std::string>(), " ", shape,
           "; a Parameter is a view of a float32 array, so another dtype would be a silent copy "
           "the optimizer's updates never reach (copy on purpose: "
           "np.ascontiguousarray(a, dtype=np.float32))");
    if (!(a.flags() & py::array::c_style))
      fail(where, "the array ", shape, " is not C-contiguous (strides ",
           py::str(a.attr("strides")).cast<std::string>(),
           "); a Parameter is a view, so it would be a silent copy the optimizer's updates never "
           "reach (copy on purpose: np.ascontiguousarray(a))");
    return tensor_from_numpy(a, where);
  }
  return tensor_copy(value, "float32");
}

}  // namespace

// The generation is kept in the Var object's __dict__ (py::dynamic_attr) under an interned key,
// read and written directly: a Python op call passes Vars in and out several times.
PyObject* generation_key() {
  static PyObject* key = PyUnicode_InternFromString(kGenerationAttr);
  return key;
}

py::handle tie_var_to_tape(py::handle var_object, const Var& var) {
  if (!var_object || !var.defined()) return var_object;
  static const py::detail::type_info* tape_type = py::detail::get_type_info(typeid(Tape));
  py::handle tape = py::detail::find_registered_python_instance(&var.tape(), tape_type);
  if (tape) {
    py::detail::keep_alive_impl(var_object, tape);
    tape.dec_ref();  // found with a new reference; the Var holds its own now
  }
  PyObject* dict = PyObject_GenericGetDict(var_object.ptr(), nullptr);
  if (!dict) throw py::error_already_set();
  const py::object generation = py::int_(var.tape().generation());
  const int failed = PyDict_SetItem(dict, generation_key(), generation.ptr());
  Py_DECREF(dict);
  if (failed) throw py::error_already_set();
  return var_object;
}

void check_var_is_live(py::handle var_object, const Var& var) {
  if (!var.defined()) return;
  bool stale = var.id() >= var.tape().size();
  PyObject** dict = _PyObject_GetDictPtr(var_object.ptr());
  if (!stale && dict && *dict) {
    if (PyObject* generation = PyDict_GetItemWithError(*dict, generation_key()))
      stale = PyLong_AsUnsignedLongLong(generation) != var.tape().generation();
    else if (PyErr_Occurred())
      throw py::error_already_set();
  }
  if (stale)
    fail("Var", "node ", var.id(),
         " was recorded before its tape was cleared; Vars from before Tape.clear() cannot be "
         "used (record them again)");
}

void init_autodiff(py::module_& m) {
  py::class_<Rng>(m, "Rng", "An explicit, seedable random generator (xoshiro256**).")
      .def(py::init<std::uint64_t>(), py::arg("seed") = 0)
      .def("uniform", py::overload_cast<float, float>(&Rng::uniform), py::arg("low") = 0.f,
           py::arg("high") = 1.f)
      .def("normal", &Rng::normal)
      .def("below", &Rng::below);

  py::class_<Parameter>(m, "Parameter", R"doc(
A trainable float32 tensor with its gradient. Parameter("W", np.zeros((2, 3), np.float32)) is a
view of the array (no copy: the optimizer's updates are visible in it); a weft.Tensor is shared
the same way. NumPy arrays that cannot be viewed (another dtype, strided, not C-contiguous) are
refused rather than silently copied: pass np.ascontiguousarray(a, dtype=np.float32) to copy
on purpose; so are read-only arrays (a read-only np.memmap, np.frombuffer of bytes), which the
optimizer could not update: pass np.array(a). Lists, tuples and Python numbers are copied (there is nothing to share). Used in
ops it is a leaf on the current tape.)doc")
      .def(py::init([](std::string name, py::handle value, bool trainable) {
             return Parameter(name, parameter_value(name, value), trainable);
           }),
           py::arg("name"), py::arg("value"), py::arg("trainable") = true)
      .def_property_readonly("name", &Parameter::name)
      .def_property(
          "value", [](Parameter& p) { return p.value(); },
          [](Parameter& p, py::handle v) {
            weft::Tensor t = as_tensor(v, "float32");
            if (t.shape() != p.shape())
              fail("Parameter", "'", p.name(), "': new value has shape ", t.shape().to_string(),
                   ", expected ", p.shape().to_string());
            p.value() = t;
          },
          "The value (a Tensor sharing memory; assign an array of the same shape to replace it).")
      .def_property_readonly(
          "grad", [](Parameter& p) { return grad_or_none(p.grad()); },
          "The accumulated gradient (None before any backward).")
      .def_property("trainable", &Parameter::trainable, &Parameter::set_trainable)
      .def_property("sparse_grad", &Parameter::sparse_grad, &Parameter::set_sparse_grad,
                    "Row-sparse gradients: gathers of this table (Embedding lookups, "
                    "gather_rows) record (indices, rows) instead of a dense gradient; any other "
                    "use makes that step's gradient dense.")
      .def(
          "grad_rows",
          [](Parameter& p) -> py::object {
            if (!p.grad_is_row_sparse()) return py::none();
            const RowSparseGrad& rows = p.row_sparse_grad();
            return py::make_tuple(rows.indices, rows.rows);
          },
          "The gradient as (indices int32 [k], rows [k, ...]), coalesced (indices sorted and "
          "distinct, a repeated row's gradients summed), or None when it is dense (sparse_grad "
          "off, or an op other than a gather reached the table this step, or .grad was read). "
          "Valid until the next backward or zero_grad.")
      .def_property_readonly("shape",
                             [](const Parameter& p) {
                               return py::tuple(py::cast(std::vector<std::int64_t>(
                                   p.shape().dims().begin(), p.shape().dims().end())));
                             })
      .def("numpy",
           [](Parameter& p) {
             return py::module_::import("numpy").attr("asarray")(py::cast(p.value()));
           })
      .def("zero_grad", &Parameter::zero_grad)
      .def("__repr__", [](const Parameter& p) {
        return "Parameter('" + p.name() + "', " + p.value().describe() + ")";
      });

  py::class_<Var> var(m, "Var", py::dynamic_attr(), R"doc(
A value recorded on a tape: what op bodies and Function bodies compute with. Arithmetic
operators (+ - * / @, unary -) record ops; .value is the Tensor, .grad the gradient after
backward (None if none reached it). A Var keeps its Tape alive; after the tape's clear(), using
it raises weft.Error.)doc");
  var.def(py::init<const Parameter&>(), py::arg("parameter"),
          "The parameter's leaf on the current thread's tape.")
      .def_property_readonly("value", [](const Var& v) { return check(v, "Var").value(); })
      .def_property_readonly(
          "shape",
          [](const Var& v) {
            const Shape& s = check(v, "Var").shape();
            return py::tuple(py::cast(std::vector<std::int64_t>(s.dims().begin(), s.dims().end())));
          })
      .def_property_readonly("grad",
                             [](const Var& v) { return grad_or_none(check(v, "Var").grad()); })
      .def_property_readonly("requires_grad", &Var::requires_grad)
      .def_property_readonly("defined", &Var::defined)
      .def("numpy",
           [](const Var& v) {
             return py::module_::import("numpy").attr("asarray")(py::cast(check(v, "Var").value()));
           })
      .def("item", [](const Var& v) { return check(v, "Var").value().item(); })
      .def("__add__", [](Var a, Var b) { return a + b; })
      .def("__add__", [](Var a, float b) { return a + b; })
      .def("__radd__", [](Var a, float b) { return b + a; })
      .def("__sub__", [](Var a, Var b) { return a - b; })
      .def("__sub__", [](Var a, float b) { return a - b; })
      .def("__rsub__", [](Var a, float b) { return b - a; })
      .def("__mul__", [](Var a, Var b) { return a * b; })
      .def("__mul__", [](Var a, float b) { return a * b; })
      .def("__rmul__", [](Var a, float b) { return b * a; })
      .def("__truediv__", [](Var a, Var b) { return a / b; })
      .def("__truediv__", [](Var a, float b) { return a / b; })
      .def("__matmul__", [](Var a, Var b) { return matmul(a, b); })
      .def("__neg__", [](Var a) { return -a; })
      .def("__repr__", [](const Var& v) {
        return v.defined()
                   ? "Var(" + v.value().describe() + ", node " + std::to_string(v.id()) + ")"
                   : std::string("Var(undefined)");
      });
  py::implicitly_convertible<Parameter, Var>();

  py::class_<Tape>(m, "Tape", R"doc(
Records ops for reverse-mode autodiff. `with tape:` makes it the current tape of this thread
(parameters used in ops record on it). backward(loss) fills the gradients of variables and
parameters; clear() drops every node (Vars from before become invalid).)doc")
      .def(py::init<>())
      .def(
          "constant", [](Tape& t, py::handle v) { return t.constant(as_tensor(v)); },
          py::keep_alive<0, 1>(),
          "A value with no gradient (a Tensor, or a copy of an array-like).")
      .def(
          "variable", [](Tape& t, py::handle v) { return t.variable(as_tensor(v, "float32")); },
          py::keep_alive<0, 1>(), "A leaf whose gradient backward computes (read Var.grad).")
      .def("parameter", &Tape::parameter, py::keep_alive<0, 1>())
      .def(
          "backward",
          [](Tape& t, Var out, py::object cotangent) {
            if (cotangent.is_none()) {
              py::gil_scoped_release nogil;
              t.backward(out);
            } else {
              weft::Tensor c = as_tensor(cotangent, "float32");
              py::gil_scoped_release nogil;
              t.backward(out, c);
            }
          },
          py::arg("output"), py::arg("cotangent") = py::none(),
          "Backpropagates from a one-element output (or with a cotangent of its shape).")
      .def("clear", &Tape::clear)
      .def_property("grad_enabled", &Tape::grad_enabled, &Tape::set_grad_enabled)
      .def("__len__", &Tape::size)
      .def(
          "__enter__",
          [](Tape& t) -> Tape& {
            open_scopes.push_back(std::make_unique<TapeScope>(t));
            return t;
          },
          py::return_value_policy::reference)
      .def("__exit__", [](Tape&, py::args) {
        if (!open_scopes.empty()) open_scopes.pop_back();
        return false;
      });
  m.def("current_tape", &Tape::current, py::return_value_policy::reference,
        "The current thread's tape (the innermost `with tape:` or the thread's default).");

  // ---- ops.def, one binding each -----------------------------------------------------------
  m.def(
      "op_names",
      [] {
        std::vector<std::string> out;
        for (std::string_view n : op_names()) out.emplace_back(n);
        return out;
      },
      "The names of every differentiable op (ops.def).");
  m.def("matmul", &matmul, py::arg("a"), py::arg("b"), py::arg("transpose_a") = false,
        py::arg("transpose_b") = false, "y = op(a) @ op(b) for 2-D a, b.");
  m.def("batch_matmul", &batch_matmul, py::arg("a"), py::arg("b"), py::arg("transpose_a") = false,
        py::arg("transpose_b") = false,
        "y[i] = op(a[i]) @ op(b[i]) for a [n, m, k] and b [n, k, p] batch of matrices.");
  m.def("linear", &linear, py::arg("x"), py::arg("weight"), py::arg("bias"), "y = x @ W + b.");
  m.def("linear_relu", &linear_relu, py::arg("x"), py::arg("weight"), py::arg("bias"),
        "y = relu(x @ W + b), one op: the bias added as the activation runs.");
  m.def("linear_tanh", &linear_tanh, py::arg("x"), py::arg("weight"), py::arg("bias"),
        "y = tanh(x @ W + b), one op: the bias added as the activation runs.");
  m.def("linear_sigmoid", &linear_sigmoid, py::arg("x"), py::arg("weight"), py::arg("bias"),
        "y = sigmoid(x @ W + b), one op: the bias added as the activation runs.");
  m.def("add", &add, "y = a + b (row broadcast)");
  m.def("sub", &sub, "y = a - b (row broadcast)");
  m.def("mul", &mul, "y = a * b (row broadcast)");
  m.def("div", &div, "y = a / b (row broadcast)");
  m.def("minimum", &minimum, "y = min(a, b) (row broadcast)");
  m.def("maximum", &maximum, "y = max(a, b) (row broadcast)");
  m.def("neg", &neg, "y = -x");
  m.def("abs", py::overload_cast<Var>(&weft::abs), "y = |x|");
  m.def("where", &where, py::arg("cond"), py::arg("a"), py::arg("b"),
        "y = cond ? a : b (cond bool; row broadcast)");
  m.def("equal", &equal, "a == b as bool (no gradient)");
  m.def("not_equal", &not_equal, "a != b as bool (no gradient)");
  m.def("less", &less, "a < b as bool (no gradient)");
  m.def("less_equal", &less_equal, "a <= b as bool (no gradient)");
  m.def("greater", &greater, "a > b as bool (no gradient)");
  m.def("greater_equal", &greater_equal, "a >= b as bool (no gradient)");
  m.def(
      "cast",
      [](Var x, const std::string& dtype) {
        for (DType d : kAllDTypes)
          if (dtype_name(d) == dtype) return weft::cast(x, d);
        fail("cast", "unknown dtype '", dtype, "': float32, float64, int32, int64 or bool");
      },
      py::arg("x"), py::arg("dtype"),
      "x converted to dtype (float to integer truncates and saturates; no gradient across dtypes)");
  m.def("relu", &relu, "y = max(x, 0)");
  m.def("sigmoid", &sigmoid, "y = 1 / (1 + exp(-x))");
  m.def("tanh", py::overload_cast<Var>(&weft::tanh), "y = tanh(x)");
  m.def("exp", py::overload_cast<Var>(&weft::exp), "y = exp(x)");
  m.def("log", py::overload_cast<Var>(&weft::log), "y = log(x)");
  m.def("softplus", &softplus, "y = log(1 + exp(x))");
  m.def(
      "concat",
      [](const std::vector<Var>& parts, int axis) {
        return concat(std::span<const Var>(parts), axis);
      },
      py::arg("parts"), py::arg("axis") = 1, "y = [x1 | x2 | ...] along an axis");
  m.def(
      "split",
      [](Var x, py::object sizes, int axis) {
        std::vector<std::int64_t> s;
        if (py::isinstance<py::int_>(sizes)) {
          const int n = sizes.cast<int>();
          if (n <= 0) fail("split", "the number of parts must be positive, got ", n);
          const int a = axis < 0 ? x.shape().rank() + axis : axis;
          const std::int64_t extent = (a >= 0 && a < x.shape().rank()) ? x.shape()[a] : 0;
          s.assign(std::size_t(n), extent / n);
          if (extent % n != 0) s[0] = -1;
        } else {
          s = sizes.cast<std::vector<std::int64_t>>();
        }
        return split(x, s, axis);
      },
      py::arg("x"), py::arg("sizes"), py::arg("axis") = 1,
      "[y1 | y2 | ...] = x along an axis; sizes: a list of extents or a number of equal parts");
  m.def("slice", &weft::slice, py::arg("x"), py::arg("axis"), py::arg("start"), py::arg("length"),
        "y = x[..., start:start+length, ...] along an axis");
  m.def(
      "reshape",
      [](Var x, std::vector<std::int64_t> shape) {
        return reshape(x, std::span<const std::int64_t>(shape));
      },
      py::arg("x"), py::arg("shape"), "y = x viewed with another shape (one extent may be -1)");
  m.def(
      "gather_rows", [](Var x, py::handle idx) { return gather_rows(x, index_tensor(idx)); },
      py::arg("x"), py::arg("indices"), "y[i] = x[indices[i]]");
  m.def(
      "scatter_add_rows",
      [](Var x, py::handle idx, std::int64_t n) {
        return scatter_add_rows(x, index_tensor(idx), n);
      },
      py::arg("x"), py::arg("indices"), py::arg("num_rows"),
      "y[indices[i]] += x[i], y zero elsewhere");
  m.def("sum_rows", &sum_rows, "y[0] = sum_r x[r]");
  m.def("mean_rows", &mean_rows, "y[0] = mean_r x[r]");
  m.def("max_rows", &max_rows, "y[0] = max_r x[r]");
  m.def(
      "segment_sum",
      [](Var x, py::handle ids, std::int64_t n) { return segment_sum(x, index_tensor(ids), n); },
      py::arg("x"), py::arg("segment_ids"), py::arg("num_segments"),
      "y[s] = sum of x[r] with segment_ids[r] = s");
  m.def(
      "segment_mean",
      [](Var x, py::handle ids, std::int64_t n) { return segment_mean(x, index_tensor(ids), n); },
      py::arg("x"), py::arg("segment_ids"), py::arg("num_segments"),
      "y[s] = mean of x[r] with segment_ids[r] = s");
  m.def(
      "segment_max",
      [](Var x, py::handle ids, std::int64_t n) { return segment_max(x, index_tensor(ids), n); },
      py::arg("x"), py::arg("segment_ids"), py::arg("num_segments"),
      "y[s] = max of x[r] with segment_ids[r] = s");
  m.def("sum", &weft::sum, "y = sum of every element");
  m.def("mean", &weft::mean, "y = mean of every element");
  m.def("softmax", &softmax, "y[r] = exp(x[r]) / sum exp(x[r])");
  m.def("log_softmax", &log_softmax, "y[r] = x[r] - log sum exp(x[r])");
  m.def(
      "softmax_cross_entropy",
      [](Var logits, py::handle labels) {
        return softmax_cross_entropy(logits, index_tensor(labels));
      },
      py::arg("logits"), py::arg("labels"), "y[r] = -log softmax(logits[r])[labels[r]]");
  m.def("l2_loss", &l2_loss, "y = 1/2 sum x^2");
  m.def("dropout", &dropout, py::arg("x"), py::arg("drop_prob"), py::arg("rng"),
        py::arg("training") = true, "y = x * mask / keep_prob, mask ~ Bernoulli(keep_prob)");
  m.def(
      "embedding_lookup",
      [](Var table, py::handle ids) { return embedding_lookup(table, index_tensor(ids)); },
      py::arg("table"), py::arg("ids"), "y[i] = table[ids[i]]");
  m.def("lstm_cell_state", py::overload_cast<Var, Var>(&lstm_cell_state), py::arg("gates"),
        py::arg("children"), "c = sum_k sigmoid(f_k) * x_k + sigmoid(i) * tanh(g)");
  m.def("lstm_cell_state", py::overload_cast<Var, Var, std::int64_t, float, Rng*>(&lstm_cell_state),
        py::arg("gates"), py::arg("children"), py::arg("hidden"),
        py::arg("candidate_drop_prob") = 0.0f, py::arg("rng") = nullptr,
        "c = sum_k sigmoid(f_k) * x_k + sigmoid(i) * dropout(tanh(g)), from the first (K+2)N "
        "columns of gates");
  m.def("linear_lstm_cell_state", &linear_lstm_cell_state, py::arg("x"), py::arg("weight"),
        py::arg("bias"), py::arg("children"), py::arg("candidate_drop_prob") = 0.0f,
        py::arg("rng") = nullptr,
        "lstm_cell_state(x @ weight + bias, children), weight [in, (K+2)N]: the gates are the "
        "op's own, activated in place");
  m.def("lstm_hidden", &lstm_hidden, py::arg("gates"), py::arg("offset"), py::arg("c"),
        "h = sigmoid(gates[:, offset : offset + N]) * tanh(c)");
  m.def(
      "ragged_attention",
      [](Var queries, Var memory, py::handle lengths) {
        return ragged_attention(queries, memory, index_tensor(lengths));
      },
      py::arg("queries"), py::arg("memory"), py::arg("lengths"),
      "y[i, b] = softmax(queries[i, b] @ memory[i, :lengths[i]].T) @ memory[i, :lengths[i]]: "
      "queries [n, beams, hidden], memory [n, size, hidden], lengths int32 [n]");
}

}  // namespace weft::python
