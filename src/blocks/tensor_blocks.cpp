// Blocks that make depth-0 loom values from user data or fixed tensors: AsTensor (Scalar,
// Vector), FromTensor, Zeros, OneHot, OneHotFromList, Length; and the shared helpers of
// internal.h (zero values, flattening, indices).
#include <cmath>
#include <limits>
#include <map>
#include <type_traits>

#include "internal.h"

namespace weft::blocks {
namespace internal {

void check_zeros_type(const std::string& block, const Type& type) {
  if (type.is_input() || type.kind() == Type::Kind::kBroadcast)
    fail("blocks", block, " cannot make zeros of type ", type.to_string());
  if (type.is_tuple())
    for (const Type& item : type.items()) check_zeros_type(block, item);
}

namespace {
WeaveValue zeros_rec(WeaveState& state, const detail::BlockImpl* owner, const Type& type,
                     std::int64_t& terminal) {
  switch (type.kind()) {
    case Type::Kind::kTensor: {
      const loom::TypeId id = state.type_id(type);
      return WeaveValue::of_tensor(state.memoized(owner, -1 - terminal++, [&] {
        return state.weaver().constant(id, weft::Tensor::zeros(type.shape(), type.dtype()));
      }));
    }
    case Type::Kind::kTuple: {
      WeaveList items;
      for (const Type& item : type.items())
        items.push_back(zeros_rec(state, owner, item, terminal));
      return WeaveValue::of(Type::Kind::kTuple, std::move(items));
    }
    case Type::Kind::kSequence:
      return WeaveValue::of(Type::Kind::kSequence, {});
    default:
      return WeaveValue{};
  }
}
}  // namespace

WeaveValue zeros_value(WeaveState& state, const detail::BlockImpl* owner, const Type& type) {
  std::int64_t terminal = 0;
  return zeros_rec(state, owner, type, terminal);
}

void flatten_tensors(const WeaveValue& value, std::vector<loom::Value>& out) {
  if (value.kind == Type::Kind::kTensor) {
    out.push_back(value.tensor);
  } else {
    for (const WeaveValue& item : value.items) flatten_tensors(item, out);
  }
}

WeaveValue unflatten_tensors(const Type& type, std::span<const loom::Value> values,
                             std::size_t& next) {
  if (type.is_tensor()) return WeaveValue::of_tensor(values[next++]);
  WeaveList items;
  items.reserve(type.items().size());
  for (const Type& item : type.items()) items.push_back(unflatten_tensors(item, values, next));
  return WeaveValue::of(Type::Kind::kTuple, std::move(items));
}

std::int64_t python_index(const std::string& block, std::int64_t index, std::int64_t n) {
  const std::int64_t i = index < 0 ? index + n : index;
  if (i < 0 || i >= n)
    fail("blocks", block, ": index ", index, " is out of range for ", n, " items");
  return i;
}

std::vector<std::int64_t> slice_positions(std::optional<std::int64_t> start,
                                          std::optional<std::int64_t> stop,
                                          std::optional<std::int64_t> step, std::int64_t n) {
  const std::int64_t s = step.value_or(1);
  auto clamp = [n, s](std::int64_t i) {
    if (i < 0) i += n;
    if (s > 0) return std::clamp<std::int64_t>(i, 0, n);
    return std::clamp<std::int64_t>(i, -1, n - 1);
  };
  const std::int64_t lo = start ? clamp(*start) : (s > 0 ? 0 : n - 1);
  const std::int64_t hi = stop ? clamp(*stop) : (s > 0 ? n : -1);
  std::vector<std::int64_t> positions;
  for (std::int64_t i = lo; s > 0 ? i < hi : i > hi; i += s) positions.push_back(i);
  return positions;
}

const Input& input_of(const std::string& block, const WeaveValue& value) {
  if (value.kind != Type::Kind::kInput || value.input == nullptr)
    fail("blocks", block, " expects user data (Input) here");
  return *value.input;
}

namespace {
Input to_input(const WeaveValue& value) {
  if (value.kind == Type::Kind::kInput) return *value.input;
  Input array = Input::array();
  for (const WeaveValue& item : value.items) array.push_back(to_input(item));
  return array;
}
}  // namespace

WeaveValue as_type(WeaveState& state, const Type& type, WeaveValue value) {
  if (!type.is_input() || value.kind == Type::Kind::kInput) return value;
  return WeaveValue::of_input(state.keep(to_input(value)));
}

const Block& required(const Block& block, const std::string& kind, const std::string& argument) {
  if (!block.defined())
    fail("blocks", "<", kind, ">: the ", argument,
         " block is empty (a default-constructed Block handle)");
  return block;
}

std::vector<std::string> utf8_characters(const std::string& text) {
  std::vector<std::string> characters;
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const std::size_t length = lead < 0x80           ? 1
                               : (lead >> 5) == 0x6  ? 2
                               : (lead >> 4) == 0xE  ? 3
                               : (lead >> 3) == 0x1E ? 4
                                                     : 1;
    characters.push_back(text.substr(i, length));
    i += length;
  }
  return characters;
}

WeaveItems shared_elements_of(const std::string& block, const WeaveValue& value,
                              WeaveState& state) {
  if (value.kind != Type::Kind::kInput) return value.items;
  return elements_of(block, value, state);
}

WeaveList elements_of(const std::string& block, const WeaveValue& value, WeaveState& state) {
  if (value.kind != Type::Kind::kInput) return value.items.vector();
  const Input& in = *value.input;
  if (in.is_string()) {
    WeaveList characters;
    for (const std::string& c : utf8_characters(in.get_ref<const std::string&>()))
      characters.push_back(WeaveValue::of_input(state.keep(Input(c))));
    return characters;
  }
  if (!in.is_array())
    fail("blocks", block, " expects an array, got ", describe_input(in), " (", in.type_name(), ")");
  WeaveList items;
  items.reserve(in.size());
  for (const Input& element : in) items.push_back(WeaveValue::of_input(&element));
  return items;
}

}  // namespace internal

namespace {

// A number written as text ("3", "-0.5") read as the number, as NumPy reads text into a numeric
// dtype (TF Fold's td.Scalar('int32') on a treebank's "3" label); other text is refused.
Input number_from_text(const std::string& block, const Input& text) {
  Input parsed = Input::parse(text.get_ref<const std::string&>(), nullptr, false);
  if (!parsed.is_number()) fail("blocks", block, " expects a number, got ", describe_input(text));
  return parsed;
}

// One element of user data as T, exactly: an integer in T's range for int32 and int64, true /
// false (or 0 / 1) for bool (stored as a byte), any number for the floats; numbers as text too.
template <typename T>
T element_of(const std::string& block, const Input& value) {
  if constexpr (!std::is_same_v<T, std::uint8_t>) {
    if (value.is_string()) return element_of<T>(block, number_from_text(block, value));
  }
  if constexpr (std::is_same_v<T, std::uint8_t>) {
    if (value.is_boolean()) return value.get<bool>() ? 1 : 0;
    if (value.is_number_integer() && (value == 0 || value == 1)) return T(value.get<int>());
    fail("blocks", block, " expects a boolean (true, false, 0 or 1), got ", describe_input(value));
  } else if constexpr (std::is_integral_v<T>) {
    if (!value.is_number_integer())
      fail("blocks", block, " expects an integer, got ", describe_input(value));
    const bool in_range =
        value.is_number_unsigned()
            ? value.get<std::uint64_t>() <= std::uint64_t(std::numeric_limits<T>::max())
            : value.get<std::int64_t>() >= std::int64_t(std::numeric_limits<T>::min()) &&
                  value.get<std::int64_t>() <= std::int64_t(std::numeric_limits<T>::max());
    if (!in_range)
      fail("blocks", block, ": ", describe_input(value), " is out of range for ",
           dtype_name(dtype_of<T>()));
    return T(value.get<std::int64_t>());
  } else {
    if (!value.is_number()) fail("blocks", block, " expects a number, got ", describe_input(value));
    return value.get<T>();
  }
}

// Reads a number or nested arrays of `shape` into `out` (row-major), checking everything.
template <typename T>
void read_tensor(const std::string& block, const Input& value, const Shape& shape, int axis,
                 std::vector<T>& out) {
  if (axis == shape.rank()) {
    out.push_back(element_of<T>(block, value));
    return;
  }
  if (!value.is_array() || std::int64_t(value.size()) != shape[axis])
    fail("blocks", block, " expects an array of ", shape[axis], " items at axis ", axis, " (shape ",
         shape, "), got ", describe_input(value));
  for (const Input& item : value) read_tensor(block, item, shape, axis + 1, out);
}

class AsTensorImpl : public detail::BlockImpl {
 public:
  AsTensorImpl(const Shape& shape, DType dtype)
      : BlockImpl("Tensor", Type::tensor(shape, dtype).to_string()) {
    in()->set(Type::input());
    out()->set(Type::tensor(shape, dtype));
  }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    const Input& value = internal::input_of(describe(), input);
    const Type& type = out()->type();
    const loom::TypeId id = state.type_id(type);
    if (type.dtype() == DType::kInt32 && type.shape().rank() == 0 && value.is_number_integer()) {
      // Integer scalars (ids) repeat: one constant row per distinct value.
      const std::int32_t v = element_of<std::int32_t>(describe(), value);
      return WeaveValue::of_tensor(state.memoized(this, v, [&] {
        return state.weaver().constant(id, std::span<const std::int32_t>(&v, 1));
      }));
    }
    return visit_dtype(type.dtype(), [&](auto dtype_value) {
      using T = decltype(dtype_value);
      using Stored = std::conditional_t<std::is_same_v<T, bool>, std::uint8_t, T>;
      thread_local std::vector<Stored> elements;
      elements.clear();
      read_tensor(describe(), value, type.shape(), 0, elements);
      if constexpr (std::is_same_v<T, bool>)
        return WeaveValue::of_tensor(
            state.weaver().bool_constant(id, std::span<const std::uint8_t>(elements)));
      else
        return WeaveValue::of_tensor(state.weaver().constant(id, std::span<const T>(elements)));
    });
  }
};

class FromTensorImpl : public detail::BlockImpl {
 public:
  FromTensorImpl(Parameter parameter, weft::Tensor value)
      : BlockImpl("FromTensor", parameter.defined() ? parameter.name() : ""),
        parameter_(std::move(parameter)),
        value_(std::move(value)) {
    if (parameter_.defined()) {
      if (parameter_.value().dtype() != DType::kFloat32)
        fail("blocks", describe(), ": a parameter must be float32, got ",
             parameter_.value().describe());
      out()->set(Type::tensor(parameter_.shape(), DType::kFloat32));
    } else {
      if (!value_.defined()) fail("blocks", "FromTensor of an undefined tensor");
      value_ = value_.to(Device::kCpu).clone();
      out()->set(Type::tensor(value_.shape(), value_.dtype()));
    }
  }
  // Any input (ignored): usable beside blocks that read the input, e.g. in AllOf.
  void validate() const override {}
  WeaveValue eval(WeaveState& state, const WeaveValue&) const override {
    const loom::TypeId id = state.type_id(out()->type());
    return WeaveValue::of_tensor(state.memoized(this, 0, [&] {
      return parameter_.defined() ? state.weaver().parameter(id, parameter_)
                                  : state.weaver().constant(id, value_);
    }));
  }

 private:
  Parameter parameter_;
  weft::Tensor value_;
};

class ZerosImpl : public detail::BlockImpl {
 public:
  explicit ZerosImpl(const Type& type) : BlockImpl("Zeros") {
    internal::check_zeros_type(describe(), type);
    out()->set(type);
  }
  void validate() const override {}  // any input (ignored)
  WeaveValue eval(WeaveState& state, const WeaveValue&) const override {
    return internal::zeros_value(state, this, out()->type());
  }
};

// A constant of `type` (any dtype) with every element 0 but element `index` (if >= 0), which
// is `value`.
loom::Value constant_with_element(WeaveState& state, const Type& type, std::int64_t index,
                                  double value) {
  weft::Tensor t = weft::Tensor::zeros(type.shape(), type.dtype());
  if (index >= 0)
    visit_dtype(type.dtype(), [&](auto dtype_value) {
      using T = decltype(dtype_value);
      t.data<T>()[index] = T(value);
    });
  return state.weaver().constant(state.type_id(type), t);
}

// A one-hot row for index i of n, memoized per index.
loom::Value one_hot_row(WeaveState& state, const detail::BlockImpl* block, const Type& type,
                        std::int64_t index) {
  return state.memoized(block, index, [&] { return constant_with_element(state, type, index, 1); });
}

class OneHotImpl : public detail::BlockImpl {
 public:
  OneHotImpl(std::int64_t start, std::int64_t stop, DType dtype)
      : BlockImpl("OneHot"), start_(start), stop_(stop) {
    if (stop <= start) fail("blocks", "OneHot needs start < stop, got [", start, ", ", stop, ")");
    in()->set(Type::input());
    out()->set(Type::vector(stop - start, dtype));
  }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    const Input& value = internal::input_of(describe(), input);
    if (!value.is_number_integer())
      fail("blocks", describe(), " expects an integer, got ", describe_input(value));
    const std::int64_t v = value.get<std::int64_t>();
    if (v < start_ || v >= stop_)
      fail("blocks", describe(), ": ", v, " is out of range [", start_, ", ", stop_, ")");
    return WeaveValue::of_tensor(one_hot_row(state, this, out()->type(), v - start_));
  }

 private:
  std::int64_t start_, stop_;
};

class OneHotFromListImpl : public detail::BlockImpl {
 public:
  OneHotFromListImpl(std::vector<Input> elements, DType dtype, bool strict)
      : BlockImpl("OneHotFromList"), strict_(strict) {
    if (elements.empty()) fail("blocks", describe(), " needs at least one element");
    for (std::size_t i = 0; i < elements.size(); ++i)
      if (!index_.emplace(elements[i], std::int64_t(i)).second)
        fail("blocks", describe(), ": duplicate element ", describe_input(elements[i]));
    in()->set(Type::input());
    out()->set(Type::vector(std::int64_t(elements.size()), dtype));
  }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    const Input& value = internal::input_of(describe(), input);
    auto it = index_.find(value);
    if (it == index_.end() && strict_)
      fail("blocks", describe(), ": ", describe_input(value), " is not one of the ", index_.size(),
           " elements");
    return WeaveValue::of_tensor(
        one_hot_row(state, this, out()->type(), it == index_.end() ? -1 : it->second));
  }

 private:
  std::map<Input, std::int64_t> index_;
  bool strict_;
};

class LengthImpl : public detail::BlockImpl {
 public:
  explicit LengthImpl(DType dtype) : BlockImpl("Length") {
    in()->set_check([d = describe()](const Type& t) {
      expect_kind(d, t, {Type::Kind::kSequence, Type::Kind::kTuple, Type::Kind::kInput});
    });
    out()->set(Type::scalar(dtype));
  }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    std::int64_t n = 0;
    if (input.kind == Type::Kind::kInput && input.input->is_string()) {  // Python's len(text)
      n = std::int64_t(
          internal::utf8_characters(input.input->get_ref<const std::string&>()).size());
    } else if (input.kind == Type::Kind::kInput) {
      if (!input.input->is_array() && !input.input->is_object())
        fail("blocks", describe(), " expects an array, object or string, got ",
             describe_input(*input.input));
      n = std::int64_t(input.input->size());
    } else {
      n = std::int64_t(input.items.size());
    }
    const Type& type = out()->type();
    return WeaveValue::of_tensor(
        state.memoized(this, n, [&] { return constant_with_element(state, type, 0, double(n)); }));
  }
};

}  // namespace

AsTensor::AsTensor(const Shape& shape, DType dtype)
    : Block(std::make_shared<AsTensorImpl>(shape, dtype)) {}
FromTensor::FromTensor(const Parameter& parameter)
    : Block(std::make_shared<FromTensorImpl>(parameter, weft::Tensor())) {}
FromTensor::FromTensor(const weft::Tensor& value)
    : Block(std::make_shared<FromTensorImpl>(Parameter(), value)) {}
Zeros::Zeros(const Type& type) : Block(std::make_shared<ZerosImpl>(type)) {}
OneHot::OneHot(std::int64_t start, std::optional<std::int64_t> stop, DType dtype)
    : Block(std::make_shared<OneHotImpl>(stop ? start : 0, stop ? *stop : start, dtype)) {}
OneHotFromList::OneHotFromList(std::vector<Input> elements, DType dtype, bool strict)
    : Block(std::make_shared<OneHotFromListImpl>(std::move(elements), dtype, strict)) {}
Length::Length(DType dtype) : Block(std::make_shared<LengthImpl>(dtype)) {}

}  // namespace weft::blocks
