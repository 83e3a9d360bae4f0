// Option schemas and their checked values (core/options.h).
#include "weft/core/options.h"

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "weft/core/error.h"

namespace weft {
namespace {

using nlohmann::json;

std::string known_names(const std::vector<OptionSpec>& schema) {
  std::string names;
  for (const OptionSpec& s : schema) names += (names.empty() ? "" : ", ") + s.name;
  return names;
}

// A short rendering of a bad value: never the whole of a huge input.
std::string show(const json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

std::string range_text(const OptionSpec& s) {
  const bool low = std::isfinite(s.min), high = std::isfinite(s.max);
  if (low && high) return fmt::format(" in [{}, {}]", s.min, s.max);
  if (low) return fmt::format(" >= {}", s.min);
  if (high) return fmt::format(" <= {}", s.max);
  return "";
}

// The value converted to the option's kind, or an error message.
json checked(const OptionSpec& s, const json& value, std::string& why) {
  switch (s.kind) {
    case OptionKind::kInt: {
      double v = 0;
      if (value.is_number_integer()) {
        v = double(value.get<std::int64_t>());
        if (value.is_number_unsigned() && value.get<std::uint64_t>() > (1ull << 53)) v = 1e300;
      } else if (value.is_number_float() &&
                 std::floor(value.get<double>()) == value.get<double>()) {
        v = value.get<double>();
      } else {
        why = "must be an integer";
        return nullptr;
      }
      if (!(v >= s.min && v <= s.max) || std::abs(v) > 9.0e15) {
        why = "must be an integer" + range_text(s);
        return nullptr;
      }
      return std::int64_t(v);
    }
    case OptionKind::kFloat: {
      if (!value.is_number()) {
        why = "must be a number";
        return nullptr;
      }
      const double v = value.get<double>();
      if (!std::isfinite(v) || !(v >= s.min && v <= s.max)) {
        why = "must be a finite number" + range_text(s);
        return nullptr;
      }
      return v;
    }
    case OptionKind::kBool:
      if (!value.is_boolean()) {
        why = "must be true or false";
        return nullptr;
      }
      return value;
    case OptionKind::kString: {
      if (!value.is_string()) {
        why = "must be a string";
        return nullptr;
      }
      const std::string& v = value.get_ref<const std::string&>();
      if (!s.choices.empty() &&
          std::find(s.choices.begin(), s.choices.end(), v) == s.choices.end()) {
        std::string list;
        for (const std::string& c : s.choices) list += (list.empty() ? "" : ", ") + c;
        why = "must be one of " + list;
        return nullptr;
      }
      return value;
    }
  }
  why = "has an unknown kind";
  return nullptr;
}

}  // namespace

std::string_view option_kind_name(OptionKind kind) {
  switch (kind) {
    case OptionKind::kInt:
      return "int";
    case OptionKind::kFloat:
      return "float";
    case OptionKind::kBool:
      return "bool";
    case OptionKind::kString:
      return "string";
  }
  return "?";
}

std::string_view option_role_name(OptionRole role) {
  switch (role) {
    case OptionRole::kArchitecture:
      return "architecture";
    case OptionRole::kData:
      return "data";
    case OptionRole::kRuntime:
      return "runtime";
    case OptionRole::kTraining:
      return "training";
  }
  return "?";
}

json OptionSpec::to_json() const {
  json out{{"name", name},
           {"kind", option_kind_name(kind)},
           {"default", default_value},
           {"help", help},
           {"role", option_role_name(role)}};
  if (std::isfinite(min)) out["min"] = min;
  if (std::isfinite(max)) out["max"] = max;
  if (!choices.empty()) out["choices"] = choices;
  return out;
}

OptionValues::OptionValues(std::string owner, std::vector<OptionSpec> schema)
    : owner_(std::move(owner)), schema_(std::move(schema)) {
  for (std::size_t i = 0; i < schema_.size(); ++i) {
    const OptionSpec& s = schema_[i];
    for (std::size_t j = 0; j < i; ++j) {
      if (schema_[j].name == s.name) fail(owner_, "option '", s.name, "' is declared twice");
    }
    std::string why;
    json value = checked(s, s.default_value, why);
    if (!why.empty()) fail(owner_, "the default of option '", s.name, "' ", why);
    values_[s.name] = std::move(value);
  }
}

const OptionSpec* OptionValues::find(std::string_view name) const {
  for (const OptionSpec& s : schema_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const OptionSpec& OptionValues::spec(std::string_view name) const {
  const OptionSpec* s = find(name);
  if (s == nullptr) {
    fail(owner_, "no option '", name, "' (known: ", known_names(schema_), ")");
  }
  return *s;
}

void OptionValues::set(std::string_view name, const json& value, std::string_view source) {
  const OptionSpec* s = find(name);
  if (s == nullptr) {
    fail(owner_, source, ": no option '", name, "' (known: ", known_names(schema_), ")");
  }
  std::string why;
  json converted = checked(*s, value, why);
  if (!why.empty()) fail(owner_, source, ": option '", name, "' ", why, ", got ", show(value));
  values_[s->name] = std::move(converted);
}

void OptionValues::set_text(std::string_view name, std::string_view text, std::string_view source) {
  const OptionSpec& s = spec(name);
  const std::string copy(text);
  switch (s.kind) {
    case OptionKind::kInt:
    case OptionKind::kFloat: {
      errno = 0;
      char* end = nullptr;
      const double v = std::strtod(copy.c_str(), &end);
      if (copy.empty() || end != copy.c_str() + copy.size() || errno == ERANGE) {
        fail(owner_, source, ": option '", name, "' must be a number, got ", show(json(copy)));
      }
      set(name,
          s.kind == OptionKind::kInt && std::floor(v) == v && std::abs(v) < 9.0e15
              ? json(std::int64_t(v))
              : json(v),
          source);
      return;
    }
    case OptionKind::kBool:
      if (copy == "true" || copy == "1") return set(name, true, source);
      if (copy == "false" || copy == "0") return set(name, false, source);
      fail(owner_, source, ": option '", name, "' must be true or false, got ", show(json(copy)));
    case OptionKind::kString:
      return set(name, json(copy), source);
  }
}

void OptionValues::update(const json& values, std::string_view source) {
  if (!values.is_object()) fail(owner_, source, ": options must be a JSON object");
  for (const auto& [name, value] : values.items()) set(name, value, source);
}

const json& OptionValues::value(std::string_view name) const { return values_.at(spec(name).name); }

std::int64_t OptionValues::integer(std::string_view name) const {
  const OptionSpec& s = spec(name);
  if (s.kind != OptionKind::kInt) fail(owner_, "option '", name, "' is not an integer");
  return values_.at(s.name).get<std::int64_t>();
}

double OptionValues::number(std::string_view name) const {
  const OptionSpec& s = spec(name);
  if (s.kind != OptionKind::kFloat && s.kind != OptionKind::kInt) {
    fail(owner_, "option '", name, "' is not a number");
  }
  return values_.at(s.name).get<double>();
}

bool OptionValues::flag(std::string_view name) const {
  const OptionSpec& s = spec(name);
  if (s.kind != OptionKind::kBool) fail(owner_, "option '", name, "' is not true/false");
  return values_.at(s.name).get<bool>();
}

const std::string& OptionValues::text(std::string_view name) const {
  const OptionSpec& s = spec(name);
  if (s.kind != OptionKind::kString) fail(owner_, "option '", name, "' is not a string");
  return values_.at(s.name).get_ref<const std::string&>();
}

json OptionValues::values_of(OptionRole role) const {
  json out = json::object();
  for (const OptionSpec& s : schema_) {
    if (s.role == role) out[s.name] = values_.at(s.name);
  }
  return out;
}

}  // namespace weft
