// A Python array as baton sees it: a pointer to its first element, a baton
// DType and a shape, without copying anything.
//
// Three ways in, tried in this order:
//   - the buffer protocol (NumPy arrays, memoryview, array.array): the
//     format character gives the dtype ('f' f32, 'e' f16, '?' bool, ...);
//   - a plain torch.Tensor or Parameter on the CPU, contiguous, of a dtype
//     baton has: its own attributes (data_ptr, shape, dtype), half a DLPack
//     export's cost, with the same view as DLPack would give;
//   - DLPack (`__dlpack__`: torch.Tensor, and anything else that exports it):
//     the DLDataType gives it (kDLBfloat 16 bits: bf16); a tensor that
//     requires grad is read through `.detach()` (the same storage).
// Either way the dtype's name goes through baton::ParseDType, so a name
// baton learns is accepted here at once.
//
// Refused, as an InvalidArgument naming the array: a read-only buffer, a
// non-contiguous layout (strides other than C order), memory that is not
// the host's (a CUDA tensor), a dtype baton has no type for (complex,
// object, long double, a structured dtype), non-native byte order.
//
// The view keeps the object and what exports its memory (the Py_buffer, or
// the DLPack capsule whose destructor frees the DLManagedTensor) alive;
// destroy it with the GIL held.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "baton/dtype.h"

namespace baton::python {

namespace py = pybind11;

struct ArrayView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;  // empty: a scalar (a 0-d array)
  py::object owner;             // the caller's object
  std::shared_ptr<void> exporter;  // the buffer or the DLPack capsule that keeps `data` valid

  uint64_t elements() const;
};

// `name` is the registration's, for the messages. `dtype`: a baton dtype name
// that overrides the array's own (raw uint16 bits as "bf16"); its element
// size must equal the array's. Throws StatusError (InvalidArgument).
// `way`, when given, says which way in was taken; `torch_attributes` false
// skips the torch way (both for _baton._view_array, which the tests compare
// the torch way with DLPack's through).
enum class ViewWay { kBuffer, kTorch, kDLPack };
ArrayView ViewArray(const std::string& name, const py::handle& array, const std::optional<std::string>& dtype,
                    ViewWay* way = nullptr, bool torch_attributes = true);

// Whether `view.owner` still holds the memory and shape `view` was taken at,
// asked cheaply: a torch.Tensor's data_ptr() and shape, about 0.5 us, where a
// DLPack export costs 4-5 us (its capsule made and freed), 20 ms a call at
// 5,000 arrays. True only when both match; false when they differ or the
// owner is no tensor, and the caller then asks with ViewArray, which decides.
// The check compares those two things, the address and the shape, whichever
// way they are asked, so a true here is the answer ViewArray would give.
bool StillAt(const ArrayView& view);

// "(3, 4)"
std::string ShapeText(const std::vector<uint64_t>& shape);

}  // namespace baton::python
