// The Python extension module weft._weft: errors first (every weft::Error becomes weft.Error, a
// ValueError, or weft.TypeError for type mismatches, with the same message), then one part per
// layer. The package python/weft re-exports it and adds the pure-Python conveniences.
#include <cstring>

#include "common.h"
#include "weft/backend/cpu.h"
#include "weft/core/build_info.h"
#include "weft/core/denormals.h"
#include "weft/core/error.h"

namespace weft::python {

namespace {
PyObject* g_error = nullptr;
PyObject* g_type_error = nullptr;

// Composition type mismatches and dtype refusals read as TypeErrors to a Python user.
bool is_type_error(const std::string& message) {
  return message.find("type") != std::string::npos &&
         (message.rfind("[blocks]", 0) == 0 || message.find("dtype") != std::string::npos ||
          message.find("Type(") != std::string::npos ||
          message.find("Tensor(") != std::string::npos);
}
// "Unable to cast Python instance of type <class 'int'> to C++ type 'weft::blocks::Block'"
// (PYBIND11_DETAILED_ERROR_MESSAGES) -> "weft: expected weft::blocks::Block, got int".
std::string cast_error_message(const std::string& what) {
  const std::string from = "of type <class '", to = "to C++ type '";
  const std::size_t a = what.find(from), b = what.find(to);
  if (a == std::string::npos || b == std::string::npos) return "weft: " + what;
  const std::size_t a_end = what.find('\'', a + from.size());
  const std::size_t b_end = what.find('\'', b + to.size());
  return "weft: expected " + what.substr(b + to.size(), b_end - b - to.size()) + ", got " +
         what.substr(a + from.size(), a_end - a - from.size());
}

// Messages quote input, which may cut a UTF-8 sequence or hold invalid bytes: PyErr_SetString
// would then raise with an empty message. Undecodable bytes become U+FFFD instead.
void set_error(PyObject* type, const std::string& message) {
  PyObject* text = PyUnicode_DecodeUTF8(message.data(), Py_ssize_t(message.size()), "replace");
  if (!text) return;  // MemoryError is set
  PyErr_SetObject(type, text);
  Py_DECREF(text);
}

}  // namespace

void init_errors(py::module_& m) {
  static py::exception<weft::Error> error(m, "Error", PyExc_ValueError);
  g_error = error.ptr();
  py::object builtins = py::module_::import("builtins");
  py::object type_error = py::reinterpret_borrow<py::object>(
      PyErr_NewExceptionWithDoc("weft.TypeError",
                                "A weft.Error about types: blocks composed with mismatched types, "
                                "tensors of an unsupported dtype. Also a builtins.TypeError.",
                                py::make_tuple(error, builtins.attr("TypeError")).ptr(), nullptr));
  type_error.inc_ref();  // kept for the module's life
  g_type_error = type_error.ptr();
  m.attr("TypeError") = type_error;
  error.attr("__doc__") = py::str(
      "Every error Weft raises on bad input (shapes, dtypes, files, arguments, data) is a "
      "weft.Error, a ValueError carrying the C++ message.");
  error.attr("__module__") = py::str("weft");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const weft::Error& e) {
      set_error(is_type_error(e.what()) ? g_type_error : g_error, e.what());
    } catch (const py::cast_error& e) {
      // A value of the wrong kind inside a container or a callback's result: a TypeError
      // naming both types, not pybind11's RuntimeError wording.
      set_error(PyExc_TypeError, cast_error_message(e.what()));
    }
  });
}

// Process-wide settings that are not a layer's: how CPU kernels treat denormal floats, the
// batch-invariant mode; and the version and commit of this build.
void init_settings(py::module_& m) {
  m.def(
      "set_denormal_mode",
      [](const std::string& mode) { set_denormal_mode(parse_denormal_mode(mode)); },
      py::arg("mode"),
      "'flush' (the default: denormal floats are flushed to zero while Weft's CPU kernels run, "
      "which keeps Intel cores at full speed) or 'keep' (each thread's own mode is left "
      "alone). The environment variable WEFT_DENORMALS sets it at start.");
  m.def(
      "denormal_mode", [] { return std::string(denormal_mode_name(denormal_mode())); },
      "The denormal mode in force: 'flush' or 'keep'.");
  m.def("set_batch_invariant", &set_batch_invariant, py::arg("on"),
        "Batch-invariant mode (process-wide; off by default, WEFT_BATCH_INVARIANT=1 sets it at "
        "start): each example's outputs are bit-identical whatever batch it is in, on this "
        "machine and build. Model.predict(..., batch_invariant=True) sets it for one call.");
  m.def("batch_invariant", &batch_invariant, "Whether the batch-invariant mode is on.");
  // What this build is (weft/core/build_info.h), as weft.__version__ and weft.build_commit.
  m.attr("__version__") = weft::version();
  m.attr("build_commit") = weft::build_commit();
}

}  // namespace weft::python

PYBIND11_MODULE(_weft, m) {
  namespace wp = weft::python;
  m.doc() = "Weft: dynamic batching of differently shaped inputs (TensorFlow Fold, natively).";
  wp::init_errors(m);
  wp::init_settings(m);
  wp::init_tensor(m);
  wp::init_autodiff(m);
  wp::init_nn(m);
  wp::init_blocks(m);
  wp::init_train(m);
  wp::init_models(m);
  wp::init_flow(m);
  wp::init_python_ops(m);
  wp::init_torch_glue(m);
}
