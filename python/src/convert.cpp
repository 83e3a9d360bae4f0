// Python values <-> Input (nlohmann::json): examples arrive as plain Python data (dicts, lists,
// numbers, strings) and are converted once per weave; callbacks get them back as Python data.
// The conversion holds Python's values to what the C++ readers accept from files: 64-bit
// integers, valid Unicode, and nesting no deeper than max_json_depth (a C++ recursion per level).
#include <pybind11/numpy.h>

#include "common.h"
#include "weft/core/error.h"
#include "weft/io/input_limits.h"

namespace weft::python {
namespace {

constexpr const char* kWhere = "example";

std::string type_name(py::handle value) {
  return py::str(py::type::of(value).attr("__name__")).cast<std::string>();
}

nlohmann::json int_to_json(py::handle value) {
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow == 0 && !(v == -1 && PyErr_Occurred())) return std::int64_t(v);
  PyErr_Clear();
  if (overflow > 0) {  // beyond int64: uint64 still fits JSON's unsigned integers
    const unsigned long long u = PyLong_AsUnsignedLongLong(value.ptr());
    if (!PyErr_Occurred()) return std::uint64_t(u);
    PyErr_Clear();
  }
  // str() of a huge int is slow (and refused past 4300 digits): name large ones by their size.
  const auto bits = value.attr("bit_length")().cast<std::int64_t>();
  const std::string shown =
      bits <= 128 ? py::str(value).cast<std::string>() : "of " + std::to_string(bits) + " bits";
  fail(kWhere, "the integer ", shown,
       " does not fit 64 bits (Weft's integers are int64, or uint64 when positive)");
}

nlohmann::json to_json_at(py::handle value, std::int64_t depth) {
  if (value.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>();
  if (py::isinstance<py::int_>(value)) return int_to_json(value);
  if (py::isinstance<py::float_>(value)) return value.cast<double>();
  if (py::isinstance<py::str>(value)) return utf8_of(value, kWhere);
  const bool nested = py::isinstance<py::dict>(value) || py::isinstance<py::list>(value) ||
                      py::isinstance<py::tuple>(value);
  const std::int64_t limit = io::input_limits().max_json_depth;
  if (nested && depth >= limit)
    fail(kWhere, "the value nests lists, tuples or dicts more than ", limit, " levels deep ",
         io::limit_hint("max_json_depth"));
  if (py::isinstance<py::dict>(value)) {
    nlohmann::json out = nlohmann::json::object();
    for (auto item : value.cast<py::dict>()) {
      if (!py::isinstance<py::str>(item.first))
        throw py::type_error("weft: dict keys of an example must be str, got " +
                             type_name(item.first));
      out[utf8_of(item.first, "example dict key")] = to_json_at(item.second, depth + 1);
    }
    return out;
  }
  if (nested) {
    nlohmann::json out = nlohmann::json::array();
    for (py::handle item : value) out.push_back(to_json_at(item, depth + 1));
    return out;
  }
  if (py::isinstance<py::array>(value)) return to_json_at(value.attr("tolist")(), depth);
  // NumPy scalars and other number-like objects.
  if (py::hasattr(value, "dtype") && py::hasattr(value, "item"))
    return to_json_at(value.attr("item")(), depth);
  throw py::type_error("weft: cannot use a value of type " + type_name(value) +
                       " as example data (use dict, list, tuple, str, int, float, bool, None)");
}

}  // namespace

std::string utf8_of(py::handle text, const std::string& where) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(text.ptr(), &size);
  if (data) return std::string(data, std::size_t(size));
  PyErr_Clear();
  // The first code point UTF-8 cannot hold: a lone surrogate (e.g. "\ud800").
  const Py_ssize_t length = PyUnicode_GetLength(text.ptr());
  Py_ssize_t at = 0;
  for (; at < length; ++at) {
    const Py_UCS4 c = PyUnicode_ReadChar(text.ptr(), at);
    if (c >= 0xD800 && c <= 0xDFFF) break;
  }
  char code[16];
  std::snprintf(code, sizeof code, "U+%04X",
                at < length ? unsigned(PyUnicode_ReadChar(text.ptr(), at)) : 0u);
  fail(where, "the string holds a lone surrogate (", code, " at index ", at,
       "), which is not valid Unicode text");
}

nlohmann::json to_json(py::handle value) { return to_json_at(value, 0); }

py::object from_json(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return py::none();
    case nlohmann::json::value_t::boolean:
      return py::bool_(value.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return py::int_(value.get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return py::int_(value.get<std::uint64_t>());
    case nlohmann::json::value_t::number_float:
      return py::float_(value.get<double>());
    case nlohmann::json::value_t::string:
      return py::str(value.get_ref<const std::string&>());
    case nlohmann::json::value_t::array: {
      py::list out;
      for (const auto& item : value) out.append(from_json(item));
      return out;
    }
    case nlohmann::json::value_t::object: {
      py::dict out;
      for (const auto& [k, v] : value.items()) out[py::str(k)] = from_json(v);
      return out;
    }
    default:
      return py::none();
  }
}

}  // namespace weft::python
