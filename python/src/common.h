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

#include "weft/tensor/tensor.h"

namespace weft::python {

namespace py = pybind11;

void init_errors(py::module_& m);
void init_tensor(py::module_& m);
void init_autodiff(py::module_& m);
void init_nn(py::module_& m);
void init_blocks(py::module_& m);
void init_train(py::module_& m);
void init_models(py::module_& m);

// Python value (None, bool, int, float, str, list, tuple, dict with str keys, NumPy scalars and
// arrays) -> JSON, and back. Unsupported objects raise TypeError naming their type.
nlohmann::json to_json(py::handle value);
py::object from_json(const nlohmann::json& value);

// Tensors from Python: a view of a NumPy array (no copy, or an error saying why not), a
// converting copy of any array-like, and "a Tensor as it is, else a copy" for arguments.
weft::Tensor tensor_from_numpy(const py::array& array);
weft::Tensor tensor_copy(py::handle data, const std::optional<std::string>& dtype);
weft::Tensor as_tensor(py::handle value, std::optional<std::string> dtype = std::nullopt);

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

}  // namespace weft::python
