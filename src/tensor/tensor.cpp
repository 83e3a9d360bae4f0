// Tensor handles: reference counting, views, host copies and printing.
#include "weft/tensor/tensor.h"

#include <cstring>
#include <sstream>
#include <type_traits>

#include "../backend/device_memory.h"
#include "../backend/kernels.h"
#include "weft/core/error.h"

namespace weft {

Tensor::Tensor(const Tensor& other)
    : block_(other.block_), offset_(other.offset_), shape_(other.shape_), dtype_(other.dtype_) {
  if (block_) detail::retain_block(block_);
}

Tensor::Tensor(Tensor&& other) noexcept
    : block_(other.block_), offset_(other.offset_), shape_(other.shape_), dtype_(other.dtype_) {
  other.block_ = nullptr;
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) {
    if (other.block_) detail::retain_block(other.block_);
    if (block_) detail::release_block(block_);
    block_ = other.block_;
    offset_ = other.offset_;
    shape_ = other.shape_;
    dtype_ = other.dtype_;
  }
  return *this;
}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    if (block_) detail::release_block(block_);
    block_ = other.block_;
    offset_ = other.offset_;
    shape_ = other.shape_;
    dtype_ = other.dtype_;
    other.block_ = nullptr;
  }
  return *this;
}

Tensor::~Tensor() {
  if (block_) detail::release_block(block_);
}

namespace {
// The bytes a tensor of this shape and dtype holds, or an error naming both when the count
// does not fit (the allocator would otherwise be asked for a wrapped, far smaller size).
std::size_t checked_bytes(const Shape& shape, DType dtype) {
  const std::int64_t elements = shape.numel();
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(elements, std::int64_t(dtype_size(dtype)), &bytes))
    fail("tensor", "shape ", shape, " of ", dtype_name(dtype), " needs more than 2^63 bytes");
  return std::size_t(bytes);
}
}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  Tensor t;
  t.block_ = detail::allocate_block(checked_bytes(shape, dtype), device);
  t.shape_ = shape;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::from_external(void* data, const Shape& shape, DType dtype, Device device,
                             void (*release)(void* context), void* context) {
  Tensor t;
  t.block_ =
      detail::wrap_external_block(data, checked_bytes(shape, dtype), device, release, context);
  t.shape_ = shape;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  backend::fill(t, 0.0f);  // all-zero bits are 0 for int32 too
  return t;
}

Tensor Tensor::full(const Shape& shape, float value, Device device) {
  Tensor t = empty(shape, DType::kFloat32, device);
  backend::fill(t, value);
  return t;
}

namespace {
template <typename T>
Tensor from_host(const Shape& shape, const std::vector<T>& values, Device device) {
  if (std::int64_t(values.size()) != shape.numel())
    fail("from_vector", values.size(), " values do not fill shape ", shape, " (", shape.numel(),
         " elements)");
  Tensor t = Tensor::empty(shape, dtype_of<T>(), device);
  backend::copy_bytes(t.raw_data(), device, values.data(), Device::kCpu, values.size() * sizeof(T));
  return t;
}
}  // namespace

Tensor Tensor::from_vector(const Shape& shape, const std::vector<float>& values, Device device) {
  return from_host(shape, values, device);
}

Tensor Tensor::from_vector(const Shape& shape, const std::vector<std::int32_t>& values,
                           Device device) {
  return from_host(shape, values, device);
}

Tensor Tensor::from_vector(const Shape& shape, const std::vector<double>& values, Device device) {
  return from_host(shape, values, device);
}

Tensor Tensor::from_vector(const Shape& shape, const std::vector<std::int64_t>& values,
                           Device device) {
  return from_host(shape, values, device);
}

Tensor Tensor::from_bools(const Shape& shape, const std::vector<bool>& values, Device device) {
  if (std::int64_t(values.size()) != shape.numel())
    fail("from_bools", values.size(), " values do not fill shape ", shape, " (", shape.numel(),
         " elements)");
  std::vector<std::uint8_t> bytes(values.begin(), values.end());
  Tensor t = Tensor::empty(shape, DType::kBool, device);
  backend::copy_bytes(t.raw_data(), device, bytes.data(), Device::kCpu, bytes.size());
  return t;
}

Tensor Tensor::scalar(float value, Device device) { return full(Shape{}, value, device); }

Device Tensor::device() const { return block_ ? block_->device : Device::kCpu; }

template <typename T>
const T* Tensor::data() const {
  if (dtype_ != dtype_of<T>())
    fail("data", "requested ", dtype_name(dtype_of<T>()), " data of a ", describe(), " tensor");
  return static_cast<const T*>(raw_data());
}
template const float* Tensor::data<float>() const;
template const std::int32_t* Tensor::data<std::int32_t>() const;
template const double* Tensor::data<double>() const;
template const std::int64_t* Tensor::data<std::int64_t>() const;
template const bool* Tensor::data<bool>() const;

void* Tensor::raw_data() { return const_cast<void*>(std::as_const(*this).raw_data()); }

const void* Tensor::raw_data() const {
  if (!block_) return nullptr;
  return static_cast<const char*>(block_->data) + offset_ * std::int64_t(dtype_size(dtype_));
}

Tensor Tensor::rows_view(std::int64_t start, std::int64_t count) const {
  if (rank() == 0) fail("rows_view", "a scalar has no rows");
  if (start < 0 || count < 0 || start + count > rows())
    fail("rows_view", "rows [", start, ", ", start + count, ") out of range for ", describe());
  Tensor view = *this;
  view.offset_ += start * row_size();
  view.shape_[0] = count;
  return view;
}

Tensor Tensor::reshaped(const Shape& shape) const {
  if (shape.numel() != numel())
    fail("reshape", "cannot view ", describe(), " (", numel(), " elements) as ", shape, " (",
         shape.numel(), " elements)");
  Tensor view = *this;
  view.shape_ = shape;
  return view;
}

Tensor Tensor::clone() const {
  Tensor copy = empty(shape_, dtype_, device());
  backend::copy_bytes(copy.raw_data(), copy.device(), raw_data(), device(), nbytes());
  return copy;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  Tensor copy = empty(shape_, dtype_, target);
  backend::copy_bytes(copy.raw_data(), target, raw_data(), device(), nbytes());
  return copy;
}

std::vector<float> Tensor::to_float_vector() const {
  std::vector<float> out(static_cast<std::size_t>(numel()));
  Tensor host = to(Device::kCpu);
  if (!out.empty()) std::memcpy(out.data(), host.data<float>(), out.size() * sizeof(float));
  return out;
}

std::vector<std::int32_t> Tensor::to_int_vector() const {
  std::vector<std::int32_t> out(static_cast<std::size_t>(numel()));
  Tensor host = to(Device::kCpu);
  if (!out.empty())
    std::memcpy(out.data(), host.data<std::int32_t>(), out.size() * sizeof(std::int32_t));
  return out;
}

std::vector<double> Tensor::to_double_vector() const {
  std::vector<double> out(static_cast<std::size_t>(numel()));
  if (out.empty()) return out;
  const Tensor host = to(Device::kCpu);
  visit_dtype(dtype_, [&](auto type) {
    using T = decltype(type);
    const T* values = host.data<T>();
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = double(values[i]);
  });
  return out;
}

float Tensor::item() const {
  if (numel() != 1) fail("item", "expected a one-element tensor, got ", describe());
  return to_float_vector()[0];
}

std::string Tensor::describe() const {
  std::ostringstream out;
  out << dtype_name(dtype_) << " " << shape_;
  return out.str();
}

std::string Tensor::to_string() const {
  std::ostringstream out;
  out << "Tensor(" << dtype_name(dtype_) << ", " << shape_ << ", " << device_name(device());
  if (defined() && numel() <= 32) {
    out << ", {";
    const Tensor host = to(Device::kCpu);
    visit_dtype(dtype_, [&](auto type) {
      using T = decltype(type);
      const T* values = host.data<T>();
      for (std::int64_t i = 0; i < numel(); ++i) {
        out << (i ? ", " : "");
        if constexpr (std::is_same_v<T, bool>)
          out << (values[i] ? "true" : "false");
        else
          out << values[i];
      }
    });
    out << "}";
  }
  out << ")";
  return out.str();
}

}  // namespace weft
