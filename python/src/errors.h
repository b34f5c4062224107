// baton's Status as Python exceptions.
//
// Every failed baton::Status that reaches Python is thrown as a StatusError
// (Check); the translator registered by BindErrors turns it into the
// exception of baton._baton named after its code, whose message is baton's
// own text: "baton[ckpt] InvalidArgument (rank 3 on n2, job 17): ...".
//
//   baton.Error                      every failure of baton
//   baton.InvalidArgument            (also a ValueError)   Code::kInvalidArgument
//   baton.NotFound                                         Code::kNotFound
//   baton.CorruptCheckpointError                           Code::kCorruption
//   baton.IOError                    (also an OSError)     Code::kIOError
//   baton.TimeoutError               (also builtins.TimeoutError) Code::kTimeout
//   baton.Unavailable                                      Code::kUnavailable
//   baton.Aborted                                          Code::kAborted
//   baton.InternalError                                    Code::kInternal
//
// Each exception carries the Status's parts as attributes: code (the
// code's name, "InvalidArgument"), component ("ckpt"), where ("rank 3 on
// n2, job 17") and message (the text without the prefix).
#pragma once

#include <pybind11/pybind11.h>

#include <exception>
#include <string>

#include "baton/status.h"

namespace baton::python {

namespace py = pybind11;

// The component of the failures the binding itself finds (bad arguments).
inline constexpr const char* kComponent = "python";

class StatusError : public std::exception {
 public:
  explicit StatusError(Status status) : status_(std::move(status)), what_(status_.ToString()) {}
  const char* what() const noexcept override { return what_.c_str(); }
  const Status& status() const { return status_; }

 private:
  Status status_;
  std::string what_;
};

// Throws StatusError when `s` failed: the one way a baton failure leaves C++.
void Check(const Status& s);
// Throws an InvalidArgument of the binding (a ValueError in Python).
[[noreturn]] void ThrowInvalid(const std::string& message);

// Creates the exception classes in `m` and registers their translator.
void BindErrors(py::module_& m);

}  // namespace baton::python
