#include "python/src/array_view.h"

#include <dlpack/dlpack.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>

#include "python/src/errors.h"

namespace baton::python {
namespace {

std::string Quoted(const std::string& name) { return "array '" + name + "'"; }

// "RuntimeError: Bool type is not supported by dlpack" (what() adds the traceback).
std::string PythonErrorText(const py::error_already_set& e) {
  return std::string(py::str(e.type().attr("__name__"))) + ": " + std::string(py::str(e.value()));
}

// The Python-side description of the array's type, for messages: numpy's
// dtype name where there is one, else its type name.
std::string TypeText(const py::handle& array) {
  try {
    if (py::hasattr(array, "dtype")) return py::str(array.attr("dtype"));
  } catch (const py::error_already_set&) {
  }
  return py::str(py::type::handle_of(array).attr("__name__"));
}

// The baton name of a struct-module format (PEP 3118) of `itemsize` bytes;
// empty when baton has no type for it.
std::string NameOfFormat(std::string_view format, size_t itemsize) {
  if (!format.empty() && (format[0] == '@' || format[0] == '=' || format[0] == '<')) format.remove_prefix(1);
  if (format.size() != 1) return "";  // complex ("Zf"), structured ("T{...}"), big-endian (">f")
  const std::string bits = std::to_string(itemsize * 8);
  switch (format[0]) {
    case '?': return itemsize == 1 ? "bool" : "";
    case 'b': case 'h': case 'i': case 'l': case 'q': case 'n': return "i" + bits;
    case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N': return "u" + bits;
    case 'e': return itemsize == 2 ? "f16" : "";
    case 'f': return itemsize == 4 ? "f32" : "";
    case 'd': return itemsize == 8 ? "f64" : "";
    default: return "";  // 'O' object, 'g' long double, 'c'/'s' bytes, ...
  }
}

std::string NameOfDLType(const DLDataType& t) {
  if (t.lanes != 1) return "";
  const std::string bits = std::to_string(t.bits);
  switch (t.code) {
    case kDLInt: return "i" + bits;
    case kDLUInt: return "u" + bits;
    case kDLFloat: return "f" + bits;
    case kDLBfloat: return t.bits == 16 ? "bf16" : "";
    case 6: return t.bits == 8 ? "bool" : "";  // kDLBool (DLPack 0.8; Debian's header is 0.6)
    default: return "";                        // kDLComplex, kDLOpaqueHandle
  }
}

std::string DLTypeText(const DLDataType& t) {
  static const char* const kCodes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  const std::string code = t.code < 7 ? kCodes[t.code] : "code " + std::to_string(t.code);
  return code + std::to_string(t.bits) + (t.lanes != 1 ? "x" + std::to_string(t.lanes) : "");
}

// The element type: `own` (the array's, maybe empty) unless `override` names one.
DType ResolveDType(const std::string& name, const std::string& own, const std::string& own_text, size_t itemsize,
                   const std::optional<std::string>& override) {
  DType t = DType::kF32;
  if (override) {
    if (!ParseDType(*override, &t).ok())
      ThrowInvalid(Quoted(name) + ": dtype='" + *override + "' is not a baton dtype");
    if (DTypeSize(t) != itemsize)
      ThrowInvalid(Quoted(name) + ": dtype='" + *override + "' has " + std::to_string(DTypeSize(t)) +
                   "-byte elements but the array (" + own_text + ") has " + std::to_string(itemsize) + "-byte ones");
    return t;
  }
  if (own.empty() || !ParseDType(own, &t).ok())
    ThrowInvalid(Quoted(name) + ": its dtype " + own_text + " has no baton dtype" +
                 (own.empty() ? "" : " ('" + own + "' is not one baton knows)") +
                 " (baton's: f32 f64 bf16 f16 i32 i64 u8 and what baton::ParseDType accepts; dtype= reinterprets "
                 "elements of the same size)");
  return t;
}

// Whether `strides` (in `unit`s) are C order for `shape` (dims of one
// element, and empty arrays, have any stride).
bool IsCContiguous(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int64_t unit) {
  int64_t expect = unit;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 0) return true;
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

ArrayView ViewBuffer(const std::string& name, const py::handle& array, const std::optional<std::string>& dtype) {
  auto info = std::make_shared<py::buffer_info>();
  try {
    *info = py::reinterpret_borrow<py::buffer>(array).request();
  } catch (const py::error_already_set& e) {
    ThrowInvalid(Quoted(name) + " (" + TypeText(array) + ") exports no usable buffer: " + PythonErrorText(e));
  } catch (const std::exception& e) {
    ThrowInvalid(Quoted(name) + " (" + TypeText(array) + ") exports no usable buffer: " + e.what());
  }
  if (info->readonly)
    ThrowInvalid(Quoted(name) + " is read-only: restore writes into a registered array (numpy: "
                                "array.flags.writeable is False; register a writable copy)");
  std::vector<int64_t> shape(info->shape.begin(), info->shape.end());
  std::vector<int64_t> strides(info->strides.begin(), info->strides.end());
  if (!IsCContiguous(shape, strides, info->itemsize))
    ThrowInvalid(Quoted(name) + " is not C-contiguous (shape " + py::str(py::cast(shape)).cast<std::string>() +
                 ", strides " + py::str(py::cast(strides)).cast<std::string>() +
                 " bytes): baton reads and writes it as one block; register numpy.ascontiguousarray(a) and "
                 "keep that");
  ArrayView v;
  v.dtype = ResolveDType(name, NameOfFormat(info->format, static_cast<size_t>(info->itemsize)),
                         TypeText(array) + ", format '" + info->format + "'", static_cast<size_t>(info->itemsize),
                         dtype);
  v.data = info->ptr;
  for (int64_t d : shape) v.shape.push_back(static_cast<uint64_t>(d));
  v.owner = py::reinterpret_borrow<py::object>(array);
  v.exporter = info;
  return v;
}

ArrayView ViewDLPack(const std::string& name, const py::handle& array, const std::optional<std::string>& dtype) {
  py::object source = py::reinterpret_borrow<py::object>(array);
  // torch refuses to export a tensor that requires grad; .detach() shares
  // its storage, so a restore still writes into the caller's tensor.
  if (py::hasattr(source, "requires_grad") && py::hasattr(source, "detach") &&
      py::bool_(source.attr("requires_grad")))
    source = source.attr("detach")();
  py::object capsule;
  try {
    capsule = source.attr("__dlpack__")();
  } catch (const py::error_already_set& e) {
    ThrowInvalid(Quoted(name) + " (" + TypeText(array) + ") cannot be exported through DLPack: " + PythonErrorText(e) +
                 " (a torch.bool tensor: register tensor.view(torch.uint8) with dtype='bool')");
  }
  // The capsule is kept, not consumed: its destructor (the producer's)
  // calls the DLManagedTensor's deleter when the registration ends.
  auto* managed = py::reinterpret_borrow<py::capsule>(capsule).get_pointer<DLManagedTensor>();
  if (managed == nullptr) ThrowInvalid(Quoted(name) + ": __dlpack__ returned a capsule without a tensor");
  const DLTensor& t = managed->dl_tensor;
  if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost)
    ThrowInvalid(Quoted(name) + " is in device memory (DLPack device type " +
                 std::to_string(static_cast<int>(t.device.device_type)) + ", id " +
                 std::to_string(t.device.device_id) +
                 "): baton saves host memory; register a CPU tensor (tensor.cpu()) and copy into it before a save");
  std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
  if (t.strides != nullptr && !IsCContiguous(shape, std::vector<int64_t>(t.strides, t.strides + t.ndim), 1))
    ThrowInvalid(Quoted(name) + " is not contiguous (shape " + py::str(py::cast(shape)).cast<std::string>() +
                 ", strides " + py::str(py::cast(std::vector<int64_t>(t.strides, t.strides + t.ndim))).cast<std::string>() +
                 " elements): baton reads and writes it as one block; register tensor.contiguous() and keep that");
  const size_t itemsize = (static_cast<size_t>(t.dtype.bits) * t.dtype.lanes + 7) / 8;
  ArrayView v;
  v.dtype = ResolveDType(name, NameOfDLType(t.dtype), TypeText(array) + ", DLPack " + DLTypeText(t.dtype), itemsize,
                         dtype);
  v.data = static_cast<char*>(t.data) + t.byte_offset;
  for (int64_t d : shape) v.shape.push_back(static_cast<uint64_t>(d));
  v.owner = py::reinterpret_borrow<py::object>(array);
  v.exporter = std::make_shared<py::object>(std::move(capsule));
  return v;
}

// torch's tensor types and the dtypes ViewTorch maps itself, looked up once
// torch is imported (never imported here: a program without torch never
// loads it). Leaked on purpose: no Python object may be released after the
// interpreter has gone.
struct TorchTypes {
  PyObject* tensor = nullptr;
  PyObject* parameter = nullptr;
  PyObject* strided = nullptr;
  struct Type {
    PyObject* dtype;
    const char* name;  // baton's, as NameOfDLType gives it for the same DLPack export
    size_t itemsize;
  };
  std::vector<Type> dtypes;
};

const TorchTypes* Torch() {
  static const TorchTypes* types = nullptr;  // the GIL is held: no other thread is here
  if (types != nullptr) return types;
  PyObject* module = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");  // borrowed
  if (module == nullptr) return nullptr;  // not imported: no tensor of its can be here
  try {
    py::module_ torch = py::reinterpret_borrow<py::module_>(module);
    auto made = std::make_unique<TorchTypes>();
    made->tensor = py::object(torch.attr("Tensor")).release().ptr();
    made->parameter = py::object(torch.attr("nn").attr("Parameter")).release().ptr();
    made->strided = py::object(torch.attr("strided")).release().ptr();
    const std::pair<const char*, const char*> names[] = {
        {"float32", "f32"}, {"float64", "f64"}, {"float16", "f16"}, {"bfloat16", "bf16"}, {"int8", "i8"},
        {"int16", "i16"}, {"int32", "i32"}, {"int64", "i64"}, {"uint8", "u8"}, {"bool", "bool"}};
    for (const auto& [torch_name, name] : names) {
      py::object dtype = torch.attr(torch_name);
      const size_t itemsize = dtype.attr("itemsize").cast<size_t>();
      made->dtypes.push_back({dtype.release().ptr(), name, itemsize});
    }
    types = made.release();
  } catch (const py::error_already_set&) {
    return nullptr;  // torch half imported (a tensor registered during its import): DLPack decides, and later
                     // calls look again
  }
  return types;
}

// A plain torch.Tensor or Parameter, on the CPU, strided, contiguous, of a
// dtype baton has: viewed through its own attributes, where a DLPack export
// (its capsule made and freed) took twice as long: a view 7.3-7.7 -> 3.7-3.9
// us with _baton._view_array's own call (docs/benchmarks.md, run r); a job's
// first save registers every leaf. Anything else (a subclass such
// as DTensor, a view with torch's negative bit, a layout or a dtype outside
// the list, an error) is nullopt, and ViewDLPack decides and names what it
// refuses: both ways give the same view of the same tensor (tested). The
// tensor's storage is kept alive as the DLPack capsule keeps it.
std::optional<ArrayView> ViewTorch(const py::handle& array, const std::optional<std::string>& dtype) {
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(array.ptr()));
  const TorchTypes* torch = Torch();
  if (torch == nullptr || (type != torch->tensor && type != torch->parameter)) return std::nullopt;
  try {
    if (!py::bool_(array.attr("is_cpu")) || array.attr("layout").ptr() != torch->strided ||
        py::bool_(array.attr("is_neg")()) || !py::bool_(array.attr("is_contiguous")()))
      return std::nullopt;
    const PyObject* own = array.attr("dtype").ptr();
    const TorchTypes::Type* found = nullptr;
    for (const TorchTypes::Type& t : torch->dtypes) {
      if (t.dtype == own) found = &t;
    }
    DType t = DType::kF32;
    if (found == nullptr || !ParseDType(dtype ? *dtype : found->name, &t).ok() || DTypeSize(t) != found->itemsize)
      return std::nullopt;  // ResolveDType's refusal, through DLPack
    py::tuple shape = array.attr("shape");
    ArrayView v;
    v.dtype = t;
    v.data = reinterpret_cast<void*>(array.attr("data_ptr")().cast<uintptr_t>());
    for (const py::handle d : shape) v.shape.push_back(d.cast<uint64_t>());
    v.owner = py::reinterpret_borrow<py::object>(array);
    v.exporter = std::make_shared<py::object>(array.attr("untyped_storage")());
    return v;
  } catch (const py::error_already_set&) {
    return std::nullopt;
  } catch (const py::cast_error&) {
    return std::nullopt;
  }
}

}  // namespace

uint64_t ArrayView::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

bool StillAt(const ArrayView& view) {
  PyObject* owner = view.owner.ptr();
  if (owner == nullptr || PyObject_CheckBuffer(owner)) return false;  // NumPy: its buffer is cheap to ask
  PyObject* ptr = PyObject_CallMethod(owner, "data_ptr", nullptr);
  if (ptr == nullptr) {
    PyErr_Clear();
    return false;
  }
  const unsigned long long data = PyLong_AsUnsignedLongLong(ptr);
  Py_DECREF(ptr);
  if (PyErr_Occurred() != nullptr) {
    PyErr_Clear();
    return false;
  }
  if (data != reinterpret_cast<uintptr_t>(view.data)) return false;
  PyObject* shape = PyObject_GetAttrString(owner, "shape");
  if (shape == nullptr) {
    PyErr_Clear();
    return false;
  }
  bool same = PyTuple_Check(shape) && static_cast<size_t>(PyTuple_GET_SIZE(shape)) == view.shape.size();
  for (size_t i = 0; same && i < view.shape.size(); ++i) {
    const unsigned long long d = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(shape, static_cast<Py_ssize_t>(i)));
    if (PyErr_Occurred() != nullptr) {
      PyErr_Clear();
      same = false;
    } else {
      same = d == view.shape[i];
    }
  }
  Py_DECREF(shape);
  return same;
}

std::string ShapeText(const std::vector<uint64_t>& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + (shape.size() == 1 ? ",)" : ")");
}

ArrayView ViewArray(const std::string& name, const py::handle& array, const std::optional<std::string>& dtype,
                    ViewWay* way, bool torch_attributes) {
  ViewWay ignored;
  if (way == nullptr) way = &ignored;
  *way = ViewWay::kBuffer;
  if (PyObject_CheckBuffer(array.ptr())) return ViewBuffer(name, array, dtype);
  *way = ViewWay::kTorch;
  if (torch_attributes) {
    if (std::optional<ArrayView> v = ViewTorch(array, dtype)) return std::move(*v);
  }
  *way = ViewWay::kDLPack;
  if (py::hasattr(array, "__dlpack__")) return ViewDLPack(name, array, dtype);
  ThrowInvalid(Quoted(name) + " is a " + std::string(py::str(py::type::handle_of(array).attr("__name__"))) +
               ", neither a buffer (a NumPy array) nor a DLPack tensor (a torch.Tensor)");
}

}  // namespace baton::python
