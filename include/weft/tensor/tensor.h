// Tensor: a dense, contiguous, row-major array with a leading batch axis. A Tensor is a cheap
// value-type handle; copies share the storage (reference counted), and row slices and
// reshapes are views. Ops never modify their inputs; kernels write into fresh outputs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "weft/core/export.h"
#include "weft/tensor/allocator.h"
#include "weft/tensor/dtype.h"
#include "weft/tensor/shape.h"

WEFT_API_BEGIN
namespace weft {

class Tensor {
 public:
  Tensor() = default;
  Tensor(const Tensor& other);
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(const Tensor& other);
  Tensor& operator=(Tensor&& other) noexcept;
  ~Tensor();

  // Uninitialised memory from the device pool.
  static Tensor empty(const Shape& shape, DType dtype = DType::kFloat32,
                      Device device = Device::kCpu);
  static Tensor zeros(const Shape& shape, DType dtype = DType::kFloat32,
                      Device device = Device::kCpu);
  static Tensor full(const Shape& shape, float value, Device device = Device::kCpu);
  static Tensor from_vector(const Shape& shape, const std::vector<float>& values,
                            Device device = Device::kCpu);
  static Tensor from_vector(const Shape& shape, const std::vector<std::int32_t>& values,
                            Device device = Device::kCpu);
  static Tensor from_vector(const Shape& shape, const std::vector<double>& values,
                            Device device = Device::kCpu);
  static Tensor from_vector(const Shape& shape, const std::vector<std::int64_t>& values,
                            Device device = Device::kCpu);
  static Tensor from_bools(const Shape& shape, const std::vector<bool>& values,
                           Device device = Device::kCpu);
  static Tensor scalar(float value, Device device = Device::kCpu);
  // A tensor over memory owned elsewhere (contiguous, row-major, aligned to the dtype); no copy.
  // `release(context)` runs when the last handle to it goes (the Python bindings keep the
  // NumPy array or DLPack capsule alive this way).
  static Tensor from_external(void* data, const Shape& shape, DType dtype, Device device,
                              void (*release)(void* context), void* context);

  bool defined() const { return block_ != nullptr; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device device() const;
  int rank() const { return shape_.rank(); }
  std::int64_t numel() const { return shape_.numel(); }
  std::int64_t rows() const { return shape_.rank() == 0 ? 1 : shape_[0]; }
  std::int64_t row_size() const { return shape_.row_size(); }
  std::size_t nbytes() const { return std::size_t(numel()) * dtype_size(dtype_); }

  // Typed pointers; throw when T does not match the dtype.
  template <typename T>
  T* data();
  template <typename T>
  const T* data() const;
  void* raw_data();
  const void* raw_data() const;

  // A view of rows [start, start + count) sharing this tensor's storage.
  Tensor rows_view(std::int64_t start, std::int64_t count) const;
  // A view with another shape of the same number of elements.
  Tensor reshaped(const Shape& shape) const;
  // A deep copy with its own storage.
  Tensor clone() const;
  // Copies to another device (a no-op handle copy when already there).
  Tensor to(Device device) const;

  // Host copies of the contents, for tests and I/O.
  std::vector<float> to_float_vector() const;
  std::vector<std::int32_t> to_int_vector() const;
  // Any dtype's values as doubles (exact but for int64 beyond 2^53).
  std::vector<double> to_double_vector() const;
  // The single element of a one-element float tensor.
  float item() const;

  // "Tensor(float32, [2, 3], cpu)" and, when small, the values.
  std::string to_string() const;
  // A short description for error messages: "float32 [2, 3]".
  std::string describe() const;

 private:
  detail::StorageBlock* block_ = nullptr;
  std::int64_t offset_ = 0;  // in elements from the block's data
  Shape shape_;
  DType dtype_ = DType::kFloat32;
};

template <typename T>
T* Tensor::data() {
  return const_cast<T*>(std::as_const(*this).data<T>());
}

}  // namespace weft
WEFT_API_END
