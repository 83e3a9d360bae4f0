// Shared declarations of the Python bindings: the init function of each part (one source file
// per layer bound), the conversions between Python values and Weft's Input (nlohmann::json),
// and the holder that lets C++ keep a Python callable safely (the GIL on every call and on
// destruction).
#pragma once

#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "weft/autodiff/tape.h"
#include "weft/tensor/tensor.h"

namespace weft::blocks {
struct MetricValues;
}

namespace weft::python {

namespace py = pybind11;

void init_errors(py::module_& m);
void init_tensor(py::module_& m);
void init_autodiff(py::module_& m);
void init_nn(py::module_& m);
void init_blocks(py::module_& m);
void init_train(py::module_& m);
void init_models(py::module_& m);
void init_flow(py::module_& m);
void init_torch_glue(py::module_& m);

// Python value (None, bool, int, float, str, list, tuple, dict with str keys, NumPy scalars and
// arrays) -> JSON, and back. Unsupported objects raise TypeError naming their type; integers
// beyond 64 bits, strings that are not valid Unicode and nesting deeper than max_json_depth
// (weft/io/input_limits.h, as for JSON read from files) raise weft.Error naming the value.
nlohmann::json to_json(py::handle value);
py::object from_json(const nlohmann::json& value);
// A str as UTF-8, or weft.Error naming `where` when it holds a lone surrogate.
std::string utf8_of(py::handle text, const std::string& where);

// Ties a Var handed to Python to the Python object of its Tape (when the tape is one), so the
// tape lives as long as any Var recorded on it; notes the tape's generation in the Var so a
// Var from before Tape.clear() is refused (var_on_live_tape) instead of reading another node.
py::handle tie_var_to_tape(py::handle var_object, const weft::Var& var);
void check_var_is_live(py::handle var_object, const weft::Var& var);

// Tensors from Python: a view of a NumPy array (no copy, or an error saying why not), a
// converting copy of any array-like, and "a Tensor as it is, else a copy" for arguments.
// Read-only arrays are refused (`where` names the caller in the error).
weft::Tensor tensor_from_numpy(const py::array& array, const std::string& where);
weft::Tensor tensor_copy(py::handle data, const std::optional<std::string>& dtype);
weft::Tensor as_tensor(py::handle value, std::optional<std::string> dtype = std::nullopt);
// DLPack both ways: a Tensor over a producer's memory (an object with __dlpack__, or an unused
// capsule; contiguous only), and a capsule over a Tensor's (torch.from_dlpack takes it).
weft::Tensor from_dlpack(py::object producer);
py::capsule to_dlpack(const weft::Tensor& tensor);

// A Python callable owned by C++ (a Function body, an InputTransform, a OneOf key), callable
// from any thread: each call takes the GIL, and so does the destruction.
class PyCallable {
 public:
  explicit PyCallable(py::function fn) : fn_(new py::function(std::move(fn))) {}
  ~PyCallable() {
    if (!Py_IsInitialized()) {
      (void)fn_.release();  // the interpreter is gone: leak rather than touch it
      return;
    }
    py::gil_scoped_acquire gil;
    fn_.reset();
  }
  PyCallable(const PyCallable&) = delete;
  PyCallable& operator=(const PyCallable&) = delete;
  const py::function& fn() const { return *fn_; }

 private:
  std::unique_ptr<py::function> fn_;
};
using PyCallablePtr = std::shared_ptr<PyCallable>;

// A batched body written in Python (a blocks Function's, a flow operation's): called with one
// Var per input under the GIL; returns a Var or a tuple or list of Vars, else weft.Error naming
// `what` ("Function 'cell'") and what came back.
std::function<std::vector<weft::Var>(std::span<const weft::Var>)> python_body(
    py::function fn, const std::string& what);

// "ZeroDivisionError: division by zero (at decoder.py:12, in greedy)": a Python error's type
// and text, and where it was raised (for weft.Error messages naming the failing callable).
std::string python_error_text(const py::error_already_set& e);
void init_python_ops(py::module_& m);

// A labelled metric's integer labels as a tensor [rows] of `dtype` (int32 for Weft's losses,
// int64 for torch's), or weft.Error naming a label that is not an integer.
weft::Tensor label_tensor(const weft::blocks::MetricValues& metric, weft::DType dtype);

}  // namespace weft::python

// Every Var crossing into Python goes through tie_var_to_tape, and every Var coming back from
// Python through check_var_is_live: one place for the Var's lifetime rules, whatever binding
// (op, operator, BatchResult, Function body) moves it.
namespace pybind11::detail {
template <>
class type_caster<weft::Var> : public type_caster_base<weft::Var> {
  using Base = type_caster_base<weft::Var>;

 public:
  bool load(handle src, bool convert) {
    if (!Base::load(src, convert)) return false;
    if (value) weft::python::check_var_is_live(src, *static_cast<const weft::Var*>(value));
    return true;
  }
  static handle cast(const weft::Var& v, return_value_policy policy, handle parent) {
    return weft::python::tie_var_to_tape(Base::cast(v, policy, parent), v);
  }
  static handle cast(weft::Var&& v, return_value_policy policy, handle parent) {
    const weft::Var copy = v;  // a handle: copying it is two words
    return weft::python::tie_var_to_tape(Base::cast(std::move(v), policy, parent), copy);
  }
  static handle cast(const weft::Var* v, return_value_policy policy, handle parent) {
    handle out = Base::cast(v, policy, parent);
    return v ? weft::python::tie_var_to_tape(out, *v) : out;
  }
};
}  // namespace pybind11::detail
