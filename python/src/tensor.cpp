// weft.Tensor and its bridges: the buffer protocol (np.asarray(t) is a view, no copy),
// weft.from_numpy (a view of a C-contiguous float32/int32 array, no copy), weft.tensor (a
// converting copy of any array-like) and DLPack (__dlpack__, __dlpack_device__,
// weft.from_dlpack), so torch.from_dlpack(t) and weft.from_dlpack(torch_tensor) share memory.
#include <pybind11/numpy.h>

#include <cstdint>
#include <cstring>
#include <sstream>

#include "common.h"
#include "weft/core/error.h"
#include "weft/tensor/tensor.h"

namespace weft::python {
namespace {

// ---- DLPack (the ABI of dlpack.h v0.8, declared here: Debian ships no header for it) ---------
enum DLDeviceType : std::int32_t { kDLCPU = 1, kDLCUDA = 2 };
struct DLDevice {
  std::int32_t device_type;
  std::int32_t device_id;
};
enum DLDataTypeCode : std::uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4 };
struct DLDataType {
  std::uint8_t code;
  std::uint8_t bits;
  std::uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;
  std::uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

// What a DLManagedTensor made from a weft::Tensor owns: a handle on the storage and the shape.
struct ExportedTensor {
  weft::Tensor tensor;
  std::vector<std::int64_t> shape;
  DLManagedTensor managed;
};

void delete_exported(DLManagedTensor* self) {
  delete static_cast<ExportedTensor*>(self->manager_ctx);
}

void capsule_destructor(PyObject* capsule) {
  // A capsule still named "dltensor" was never consumed: free the tensor it holds.
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    if (managed && managed->deleter) managed->deleter(managed);
  }
}

std::string dtype_text(py::handle dtype) { return py::str(dtype).cast<std::string>(); }

// Releases whatever kept external memory alive (a NumPy array, a consumed DLPack tensor). May run
// on any thread, with or without the GIL.
void release_pyobject(void* context) {
  if (!Py_IsInitialized()) return;
  py::gil_scoped_acquire gil;
  Py_XDECREF(static_cast<PyObject*>(context));
}
void release_dlpack(void* context) {
  auto* managed = static_cast<DLManagedTensor*>(context);
  if (!managed->deleter) return;
  if (Py_IsInitialized()) {
    py::gil_scoped_acquire gil;  // producers such as NumPy drop Python references here
    managed->deleter(managed);
  } else {
    managed->deleter(managed);
  }
}

Shape shape_of(const std::int64_t* dims, int ndim, const char* where) {
  if (ndim > Shape::kMaxRank)
    fail(where, "rank ", ndim, " is above Weft's maximum of ", Shape::kMaxRank);
  return Shape(std::span<const std::int64_t>(dims, std::size_t(ndim)));
}

}  // namespace

// A view of a C-contiguous float32 or int32 NumPy array: no copy; the array stays alive while
// the tensor (or any view of it) does, and writes through either are seen by both.
weft::Tensor tensor_from_numpy(const py::array& array) {
  const py::dtype dt = array.dtype();
  DType dtype;
  if (dt.is(py::dtype::of<float>()) || (dt.kind() == 'f' && dt.itemsize() == 4))
    dtype = DType::kFloat32;
  else if (dt.kind() == 'i' && dt.itemsize() == 4)
    dtype = DType::kInt32;
  else
    fail("from_numpy", "unsupported dtype ", dtype_text(dt),
         ": Weft tensors are float32 or int32 (convert first, e.g. a.astype(np.float32), or use "
         "weft.tensor(a), which copies)");
  if (dt.attr("byteorder").cast<std::string>() == ">")
    fail("from_numpy", "dtype ", dtype_text(dt), " is big-endian; Weft needs native byte order");
  if (!(array.flags() & py::array::c_style))
    fail("from_numpy", "the array is not C-contiguous (shape ",
         py::str(array.attr("shape")).cast<std::string>(), ", strides ",
         py::str(array.attr("strides")).cast<std::string>(),
         "): pass np.ascontiguousarray(a), or use weft.tensor(a), which copies");
  if (reinterpret_cast<std::uintptr_t>(array.data()) % 4 != 0)
    fail("from_numpy", "the array's data is not 4-byte aligned; use weft.tensor(a), which copies");
  std::vector<std::int64_t> dims(array.shape(), array.shape() + array.ndim());
  const Shape shape = shape_of(dims.data(), int(dims.size()), "from_numpy");
  PyObject* owner = array.ptr();
  Py_INCREF(owner);
  return weft::Tensor::from_external(const_cast<void*>(array.data()), shape, dtype, Device::kCpu,
                                     release_pyobject, owner);
}

// A copy of any array-like (lists, NumPy arrays of any numeric dtype, other Tensors); floats
// become float32 and integers int32 unless dtype says otherwise.
weft::Tensor tensor_copy(py::handle data, const std::optional<std::string>& dtype_name) {
  py::module_ np = py::module_::import("numpy");
  py::object source = py::reinterpret_borrow<py::object>(data);
  if (py::isinstance<weft::Tensor>(data)) source = np.attr("asarray")(data);
  py::array a = np.attr("asarray")(source);
  std::string target;
  if (dtype_name) {
    target = *dtype_name;
    if (target != "float32" && target != "int32")
      fail("tensor", "unsupported dtype '", target, "': Weft tensors are float32 or int32");
  } else {
    const char kind = a.dtype().kind();
    if (kind == 'f' || kind == 'b')
      target = "float32";
    else if (kind == 'i' || kind == 'u')
      target = "int32";
    else
      fail("tensor", "cannot make a tensor of dtype ", dtype_text(a.dtype()),
           ": Weft tensors are float32 or int32");
  }
  if (target == "int32" && a.dtype().kind() != 'i' && a.dtype().kind() != 'u' && a.size() > 0) {
    // Refuse silent truncation of fractional values.
    py::object frac = np.attr("any")(np.attr("not_equal")(a, np.attr("floor")(a)));
    if (frac.cast<bool>()) fail("tensor", "int32 requested for values that are not whole numbers");
  }
  if (target == "int32" && (a.dtype().kind() == 'i' || a.dtype().kind() == 'u') && a.size() > 0) {
    const long long lo = np.attr("min")(a).cast<long long>();
    const long long hi = np.attr("max")(a).cast<long long>();
    if (lo < INT32_MIN || hi > INT32_MAX)
      fail("tensor", "integer values [", lo, ", ", hi, "] do not fit int32");
  }
  py::array converted = np.attr("ascontiguousarray")(a, py::arg("dtype") = np.attr(target.c_str()));
  std::vector<std::int64_t> dims(converted.shape(), converted.shape() + converted.ndim());
  weft::Tensor out = weft::Tensor::empty(shape_of(dims.data(), int(dims.size()), "tensor"),
                                         target == "float32" ? DType::kFloat32 : DType::kInt32);
  if (out.numel() > 0) std::memcpy(out.raw_data(), converted.data(), out.nbytes());
  return out;
}

// Tensor-like arguments of the bindings: a Tensor as it is, else a copy (tensor_copy).
weft::Tensor as_tensor(py::handle value, std::optional<std::string> dtype) {
  if (py::isinstance<weft::Tensor>(value)) {
    weft::Tensor t = value.cast<weft::Tensor>();
    if (dtype && std::string(dtype_name(t.dtype())) != *dtype)
      fail("tensor", "expected a ", *dtype, " tensor, got ", t.describe());
    return t;
  }
  return tensor_copy(value, dtype);
}

weft::Tensor from_dlpack(py::object producer) {
  py::object capsule = producer;
  if (py::hasattr(producer, "__dlpack__")) capsule = producer.attr("__dlpack__")();
  if (!PyCapsule_IsValid(capsule.ptr(), "dltensor"))
    fail("from_dlpack", "expected an object with __dlpack__ or an unused DLPack capsule");
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  const DLTensor& t = managed->dl_tensor;
  Device device;
  if (t.device.device_type == kDLCPU)
    device = Device::kCpu;
  else if (t.device.device_type == kDLCUDA && t.device.device_id == 0)
    device = Device::kCuda;
  else
    fail("from_dlpack", "unsupported device type ", t.device.device_type, " (id ",
         t.device.device_id, "): Weft takes CPU tensors and CUDA device 0");
  DType dtype;
  if (t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1)
    dtype = DType::kFloat32;
  else if (t.dtype.code == kDLInt && t.dtype.bits == 32 && t.dtype.lanes == 1)
    dtype = DType::kInt32;
  else
    fail("from_dlpack", "unsupported dtype (code ", int(t.dtype.code), ", ", int(t.dtype.bits),
         " bits, ", t.dtype.lanes, " lanes): Weft tensors are float32 or int32");
  const Shape shape = shape_of(t.shape, t.ndim, "from_dlpack");
  if (t.strides) {
    std::int64_t expected = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
      if (t.shape[d] != 1 && t.strides[d] != expected)
        fail("from_dlpack", "the tensor is not contiguous (shape ", shape.to_string(),
             "): make it contiguous first (e.g. t.contiguous())");
      expected *= t.shape[d];
    }
  }
  void* data = static_cast<char*>(t.data) + t.byte_offset;
  // Consumed: the capsule must not free it any more; the tensor's last handle will.
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  return weft::Tensor::from_external(data, shape, dtype, device, release_dlpack, managed);
}

py::capsule to_dlpack(const weft::Tensor& tensor) {
  if (!tensor.defined()) fail("__dlpack__", "the tensor is undefined");
  auto* exported = new ExportedTensor{tensor, {}, {}};
  exported->shape.assign(tensor.shape().dims().begin(), tensor.shape().dims().end());
  DLTensor& t = exported->managed.dl_tensor;
  t.data = const_cast<void*>(tensor.raw_data());
  t.device = {tensor.device() == Device::kCpu ? kDLCPU : kDLCUDA, 0};
  t.ndim = tensor.rank();
  t.dtype = {std::uint8_t(tensor.dtype() == DType::kFloat32 ? kDLFloat : kDLInt), 32, 1};
  t.shape = exported->shape.data();
  t.strides = nullptr;  // compact row-major
  t.byte_offset = 0;
  exported->managed.manager_ctx = exported;
  exported->managed.deleter = delete_exported;
  return py::capsule(&exported->managed, "dltensor", capsule_destructor);
}

void init_tensor(py::module_& m) {
  py::class_<weft::Tensor>(m, "Tensor", py::buffer_protocol(), R"doc(
A dense, row-major float32 or int32 array (leading axis: the batch). Copies share storage.

np.asarray(t) and t.numpy() are views of the same memory (no copy); weft.from_numpy(a) and
weft.from_dlpack(x) make tensors over NumPy / DLPack memory without copying; weft.tensor(data)
copies and converts.)doc")
      .def(py::init([](py::handle data, std::optional<std::string> dtype) {
             return tensor_copy(data, dtype);
           }),
           py::arg("data"), py::arg("dtype") = py::none(),
           "A copy of an array-like as float32 (floats) or int32 (integers) unless dtype says.")
      .def_buffer([](weft::Tensor& t) -> py::buffer_info {
        if (t.device() != Device::kCpu)
          fail("numpy", "tensor is on ", device_name(t.device()), "; copy it to the CPU first");
        std::vector<py::ssize_t> shape(t.shape().dims().begin(), t.shape().dims().end());
        std::vector<py::ssize_t> strides(shape.size());
        py::ssize_t stride = 4;
        for (int d = int(shape.size()) - 1; d >= 0; --d) {
          strides[std::size_t(d)] = stride;
          stride *= shape[std::size_t(d)];
        }
        const bool is_float = t.dtype() == DType::kFloat32;
        return py::buffer_info(t.raw_data(), 4,
                               is_float ? py::format_descriptor<float>::format()
                                        : py::format_descriptor<std::int32_t>::format(),
                               py::ssize_t(shape.size()), shape, strides);
      })
      .def_property_readonly("shape",
                             [](const weft::Tensor& t) {
                               py::tuple out(std::size_t(t.rank()));
                               for (int d = 0; d < t.rank(); ++d)
                                 out[std::size_t(d)] = t.shape()[d];
                               return out;
                             })
      .def_property_readonly(
          "dtype", [](const weft::Tensor& t) { return std::string(dtype_name(t.dtype())); })
      .def_property_readonly(
          "device", [](const weft::Tensor& t) { return std::string(device_name(t.device())); })
      .def_property_readonly("ndim", &weft::Tensor::rank)
      .def_property_readonly("size", &weft::Tensor::numel)
      .def_property_readonly(
          "data_ptr",
          [](const weft::Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.raw_data()); },
          "The address of the first element (to check that no copy was made).")
      .def("__len__", [](const weft::Tensor& t) { return t.rank() == 0 ? 0 : t.shape()[0]; })
      .def(
          "numpy",
          [](py::object self) { return py::module_::import("numpy").attr("asarray")(self); },
          "A NumPy view of the same memory (no copy).")
      .def("item", &weft::Tensor::item)
      .def("tolist",
           [](py::object self) {
             return py::module_::import("numpy").attr("asarray")(self).attr("tolist")();
           })
      .def("clone", &weft::Tensor::clone, "A deep copy.")
      .def("reshape",
           [](const weft::Tensor& t, std::vector<std::int64_t> dims) {
             return t.reshaped(Shape(std::span<const std::int64_t>(dims)));
           })
      .def("to",
           [](const weft::Tensor& t, const std::string& device) {
             if (device != "cpu" && device != "cuda")
               fail("Tensor.to", "unknown device '", device, "'");
             return t.to(device == "cpu" ? Device::kCpu : Device::kCuda);
           })
      .def(
          "__dlpack__", [](const weft::Tensor& t, py::object /*stream*/) { return to_dlpack(t); },
          py::arg("stream") = py::none(), "A DLPack capsule sharing this tensor's memory.")
      .def("__dlpack_device__",
           [](const weft::Tensor& t) {
             return py::make_tuple(int(t.device() == Device::kCpu ? kDLCPU : kDLCUDA), 0);
           })
      .def("__repr__", &weft::Tensor::to_string);

  m.def("from_numpy", &tensor_from_numpy, py::arg("array"),
        "A tensor over a C-contiguous float32/int32 NumPy array's memory (no copy); other "
        "layouts and dtypes raise (weft.tensor copies instead).");
  m.def("tensor", &tensor_copy, py::arg("data"), py::arg("dtype") = py::none(),
        "A new tensor with a copy of data (floats -> float32, integers -> int32).");
  m.def("from_dlpack", &from_dlpack, py::arg("x"),
        "A tensor sharing the memory of a DLPack producer (torch.Tensor, np.ndarray, ...) or of "
        "an unused DLPack capsule; contiguous float32/int32 only.");
  m.def(
      "zeros",
      [](std::vector<std::int64_t> dims, const std::string& dtype) {
        return weft::Tensor::zeros(Shape(std::span<const std::int64_t>(dims)),
                                   dtype == "int32" ? DType::kInt32 : DType::kFloat32);
      },
      py::arg("shape"), py::arg("dtype") = "float32");
}

}  // namespace weft::python
