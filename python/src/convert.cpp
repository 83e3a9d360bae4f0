// Python values <-> Input (nlohmann::json): examples arrive as plain Python data (dicts, lists,
// numbers, strings) and are converted once per weave; callbacks get them back as Python data.
#include <pybind11/numpy.h>

#include "common.h"

namespace weft::python {

nlohmann::json to_json(py::handle value) {
  if (value.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>();
  if (py::isinstance<py::int_>(value)) {
    // Python ints are unbounded; anything beyond int64 is refused.
    return value.cast<std::int64_t>();
  }
  if (py::isinstance<py::float_>(value)) return value.cast<double>();
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  if (py::isinstance<py::dict>(value)) {
    nlohmann::json out = nlohmann::json::object();
    for (auto item : value.cast<py::dict>()) {
      if (!py::isinstance<py::str>(item.first))
        throw py::type_error("weft: dict keys of an example must be str, got " +
                             std::string(py::str(py::type::of(item.first).attr("__name__"))));
      out[item.first.cast<std::string>()] = to_json(item.second);
    }
    return out;
  }
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    nlohmann::json out = nlohmann::json::array();
    for (py::handle item : value) out.push_back(to_json(item));
    return out;
  }
  if (py::isinstance<py::array>(value)) return to_json(value.attr("tolist")());
  // NumPy scalars and other number-like objects.
  if (py::hasattr(value, "dtype") && py::hasattr(value, "item"))
    return to_json(value.attr("item")());
  throw py::type_error("weft: cannot use a value of type " +
                       std::string(py::str(py::type::of(value).attr("__name__"))) +
                       " as example data (use dict, list, tuple, str, int, float, bool, None)");
}

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
