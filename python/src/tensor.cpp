// weft.Tensor and its bridges: the buffer protocol (np.asarray(t) is a view, no copy),
// weft.from_numpy (a view of a C-contiguous float32/int32 array, no copy), weft.tensor (a
// converting copy of any array-like) and DLPack (__dlpack__, __dlpack_device__,
// weft.from_dlpack), so torch.from_dlpack(t) and weft.from_dlpack(torch_tensor) share memory.
#include <pybind11/numpy.h>

#include <cstdint>
#include <cstring>
#include <optional>
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
enum DLDataTypeCode : std::uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLBfloat = 4,
  kDLBool = 6
};
struct DLDataType {
  std::uint8_t code;
  std::uint8_t bits;
  std::uint16_t lanes;
};

// A Weft dtype in DLPack's terms.
DLDataType dlpack_dtype(DType dtype) {
  const std::uint8_t code =
      dtype == DType::kBool ? kDLBool : (is_floating(dtype) ? kDLFloat : kDLInt);
  return {code, std::uint8_t(8 * dtype_size(dtype)), 1};
}
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

constexpr const char* kDTypeList = "float32, float64, int32, int64 or bool";

// The Weft dtype of a NumPy dtype kind ('f', 'i', 'b') and item size, if any.
std::optional<DType> dtype_of_numpy(char kind, py::ssize_t itemsize) {
  for (DType d : kAllDTypes) {
    const char k = d == DType::kBool ? 'b' : (is_floating(d) ? 'f' : 'i');
    if (k == kind && py::ssize_t(dtype_size(d)) == itemsize) return d;
  }
  return std::nullopt;
}

// A dtype named in Python ("float32", ..., "bool").
DType dtype_named(const std::string& name, const char* where) {
  for (DType d : kAllDTypes)
    if (dtype_name(d) == name) return d;
  fail(where, "unsupported dtype '", name, "': Weft tensors are ", kDTypeList);
}

}  // namespace

// A view of a C-contiguous, writable NumPy array of a Weft dtype: no copy; the array stays alive
// while the tensor (or any view of it) does, and writes through either are seen by both.
// Read-only arrays are refused: Weft writes into the memory it views (an optimizer's update,
// np.asarray(t)[...] = ..., an op's output buffer), and a read-only mapping would fault.
weft::Tensor tensor_from_numpy(const py::array& array, const std::string& where) {
  if (!array.writeable())
    fail(where, "the array ", py::str(array.attr("shape")).cast<std::string>(),
         " is read-only (flags.writeable is False: np.frombuffer of bytes, np.load(..., "
         "mmap_mode='r'), a read-only np.memmap, a broadcast view); a Weft tensor viewing it "
         "could be written (optimizer updates, np.asarray(t)[...] = ...), so pass a writable "
         "copy: np.array(a) or a.copy() (weft.tensor(a) copies as well)");
  const py::dtype dt = array.dtype();
  // The item size through Python: pybind11 before 2.12 reads it from NumPy 1's struct layout,
  // which NumPy 2 changed (every array would be refused).
  const std::optional<DType> found =
      dtype_of_numpy(dt.kind(), dt.attr("itemsize").cast<py::ssize_t>());
  if (!found)
    fail("from_numpy", "unsupported dtype ", dtype_text(dt), ": Weft tensors are ", kDTypeList,
         " (convert first, e.g. a.astype(np.float32), or use weft.tensor(a), which copies)");
  const DType dtype = *found;
  if (dt.attr("byteorder").cast<std::string>() == ">")
    fail("from_numpy", "dtype ", dtype_text(dt), " is big-endian; Weft needs native byte order");
  if (!(array.flags() & py::array::c_style))
    fail("from_numpy", "the array is not C-contiguous (shape ",
         py::str(array.attr("shape")).cast<std::string>(), ", strides ",
         py::str(array.attr("strides")).cast<std::string>(),
         "): pass np.ascontiguousarray(a), or use weft.tensor(a), which copies");
  if (reinterpret_cast<std::uintptr_t>(array.data()) % dtype_size(dtype) != 0)
    fail("from_numpy", "the array's data is not ", dtype_size(dtype),
         "-byte aligned; use weft.tensor(a), which copies");
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
    target = std::string(weft::dtype_name(dtype_named(*dtype_name, "tensor")));
  } else {
    const char kind = a.dtype().kind();
    if (kind == 'f' || kind == 'b')
      target = "float32";
    else if (kind == 'i' || kind == 'u')
      target = "int32";
    else
      fail("tensor", "cannot make a tensor of NumPy dtype ", dtype_text(a.dtype()),
           kind == 'O' ? " (integers beyond 64 bits, ragged lists or values that are not numbers)"
                       : "",
           ": the data must be numbers, and Weft tensors are ", kDTypeList);
  }
  const DType dtype = dtype_named(target, "tensor");
  const char kind = a.dtype().kind();
  if (is_integer(dtype) && kind != 'i' && kind != 'u' && kind != 'b' && a.size() > 0) {
    // Refuse silent truncation of fractional values.
    py::object frac = np.attr("any")(np.attr("not_equal")(a, np.attr("floor")(a)));
    if (frac.cast<bool>())
      fail("tensor", target, " requested for values that are not whole numbers");
  }
  if (is_integer(dtype) && (kind == 'i' || kind == 'u') && a.size() > 0) {
    // Refuse silent wrapping: the values must fit (uint64 beyond int64 included).
    const py::object lo = np.attr("min")(a), hi = np.attr("max")(a);
    const py::object info = np.attr("iinfo")(np.attr(target.c_str()));
    if (lo.attr("__lt__")(info.attr("min")).cast<bool>() ||
        hi.attr("__gt__")(info.attr("max")).cast<bool>())
      fail("tensor", "integer values [", py::str(lo).cast<std::string>(), ", ",
           py::str(hi).cast<std::string>(), "] do not fit ", target);
  }
  py::array converted = np.attr("ascontiguousarray")(a, py::arg("dtype") = np.attr(target.c_str()));
  // The shape of `a`: ascontiguousarray makes a 0-d array 1-d, and a 0-d array is a scalar.
  std::vector<std::int64_t> dims(a.shape(), a.shape() + a.ndim());
  weft::Tensor out = weft::Tensor::empty(shape_of(dims.data(), int(dims.size()), "tensor"), dtype);
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
  std::optional<DType> found;
  for (DType d : kAllDTypes)
    if (dlpack_dtype(d).code == t.dtype.code && dlpack_dtype(d).bits == t.dtype.bits &&
        t.dtype.lanes == 1)
      found = d;
  if (!found)
    fail("from_dlpack", "unsupported dtype (code ", int(t.dtype.code), ", ", int(t.dtype.bits),
         " bits, ", t.dtype.lanes, " lanes): Weft tensors are ", kDTypeList);
  const DType dtype = *found;
  const Shape shape = shape_of(t.shape, t.ndim, "from_dlpack");
  if (t.strides && shape.numel() > 0) {  // an empty tensor's strides are arbitrary
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
  t.dtype = dlpack_dtype(tensor.dtype());
  t.shape = exported->shape.data();
  t.strides = nullptr;  // compact row-major
  t.byte_offset = 0;
  exported->managed.manager_ctx = exported;
  exported->managed.deleter = delete_exported;
  return py::capsule(&exported->managed, "dltensor", capsule_destructor);
}

void init_tensor(py::module_& m) {
  py::class_<weft::Tensor>(m, "Tensor", py::buffer_protocol(), R"doc(
A dense, row-major array of float32, float64, int32, int64 or bool (leading axis: the batch).
Copies share storage.

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
        const py::ssize_t item = py::ssize_t(dtype_size(t.dtype()));
        py::ssize_t stride = item;
        for (int d = int(shape.size()) - 1; d >= 0; --d) {
          strides[std::size_t(d)] = stride;
          stride *= shape[std::size_t(d)];
        }
        const std::string format = visit_dtype(
            t.dtype(), [](auto type) { return py::format_descriptor<decltype(type)>::format(); });
        return py::buffer_info(t.raw_data(), item, format, py::ssize_t(shape.size()), shape,
                               strides);
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
      .def("to", [](const weft::Tensor& t,
                    const std::string& device) { return t.to(parse_device(device)); })
      .def(
          "__dlpack__", [](const weft::Tensor& t, py::object /*stream*/) { return to_dlpack(t); },
          py::arg("stream") = py::none(), "A DLPack capsule sharing this tensor's memory.")
      .def("__dlpack_device__",
           [](const weft::Tensor& t) {
             return py::make_tuple(int(t.device() == Device::kCpu ? kDLCPU : kDLCUDA), 0);
           })
      .def("__repr__", &weft::Tensor::to_string);

  m.def(
      "from_numpy", [](const py::array& array) { return tensor_from_numpy(array, "from_numpy"); },
      py::arg("array"),
      "A tensor over a writable, C-contiguous NumPy array's memory (no copy); read-only arrays, "
      "other layouts and dtypes raise (weft.tensor copies instead).");
  m.def("tensor", &tensor_copy, py::arg("data"), py::arg("dtype") = py::none(),
        "A new tensor with a copy of data (floats -> float32, integers -> int32).");
  m.def("from_dlpack", &from_dlpack, py::arg("x"),
        "A tensor sharing the memory of a DLPack producer (torch.Tensor, np.ndarray, ...) or of "
        "an unused DLPack capsule; contiguous float32/int32 only.");
  m.def(
      "zeros",
      [](std::vector<std::int64_t> dims, const std::string& dtype) {
        return weft::Tensor::zeros(Shape(std::span<const std::int64_t>(dims)),
                                   dtype_named(dtype, "zeros"));
      },
      py::arg("shape"), py::arg("dtype") = "float32");
}

}  // namespace weft::python
