#include "python/src/bench_binding.h"

#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "baton/checkpointer.h"
#include "python/src/array_view.h"
#include "python/src/errors.h"
#include "python/src/runtime_binding.h"

namespace baton::python {
namespace {

class CppBench : public RuntimeUser {
 public:
  // `arrays`: this rank's shards (rows [offset, offset + rows) of dim 0 of
  // the global shape), viewed once here; the timed calls use the pointers.
  CppBench(py::object runtime, const std::string& dir, const py::list& arrays, uint64_t offset,
           uint64_t global_rows)
      : runtime_obj_(std::move(runtime)), runtime_(runtime_obj_.cast<PyRuntime*>()) {
    for (size_t i = 0; i < arrays.size(); ++i) {
      ArrayView v = ViewArray("bench" + std::to_string(i), arrays[i], std::nullopt);
      std::vector<uint64_t> global = v.shape;
      global[0] = global_rows;
      regs_.push_back({"array" + std::to_string(i), v.data, v.dtype, global, offset, v.shape[0]});
      views_.push_back(std::move(v));
    }
    CheckpointOptions o;
    o.dir = dir;
    o.level2 = false;
    Runtime& rt = runtime_->get();
    Status s;
    {
      py::gil_scoped_release release;
      s = Checkpointer::Create(rt, o, &ck_);
    }
    Check(s);
    runtime_->AddUser(this);
  }
  ~CppBench() override { Close(); }

  // A bench's save in flight is the bench's to wait for: not committed here.
  py::object CloseForRuntime(bool /*commit*/, Status* /*failure*/) override {
    Close();
    py::object runtime_ref = std::move(runtime_obj_);  // the Runtime drops it last
    runtime_obj_ = py::none();
    return runtime_ref;
  }
  void Close() {
    if (ck_) {
      py::gil_scoped_release release;
      ck_.reset();
    }
    views_.clear();
    if (runtime_ != nullptr) runtime_->RemoveUser(this);
    runtime_ = nullptr;
  }

  // Registers every array and saves (async: SaveAsync): (seconds in all,
  // seconds of the registrations).
  std::pair<double, double> RegisterAndSave(int64_t step, bool async) {
    if (!ck_) ThrowInvalid("_CppBench is closed");
    Status s;
    double seconds = 0, reg_seconds = 0;
    {
      py::gil_scoped_release release;
      const auto t0 = std::chrono::steady_clock::now();
      for (const Reg& r : regs_) {
        s = ck_->RegisterSharded(r.name, r.data, r.dtype, r.global, r.offset, r.rows);
        if (!s.ok()) break;
      }
      reg_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (s.ok()) s = async ? ck_->SaveAsync(step) : ck_->Save(step);
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    Check(s);
    return {seconds, reg_seconds};
  }

  void Wait() {
    Status s;
    {
      py::gil_scoped_release release;
      s = ck_->Wait();
    }
    Check(s);
  }

 private:
  struct Reg {
    std::string name;
    void* data;
    DType dtype;
    std::vector<uint64_t> global;
    uint64_t offset, rows;
  };
  py::object runtime_obj_;
  PyRuntime* runtime_ = nullptr;
  std::vector<ArrayView> views_;
  std::vector<Reg> regs_;
  std::unique_ptr<Checkpointer> ck_;
};

}  // namespace

void BindBench(py::module_& m) {
  py::class_<CppBench>(m, "_CppBench",
                       "The C++ side of python/bench/bench_overhead.py: registrations and saves made and timed in C++.")
      .def(py::init<py::object, std::string, py::list, uint64_t, uint64_t>(), py::arg("runtime"), py::arg("dir"),
           py::arg("arrays"), py::arg("offset"), py::arg("global_rows"))
      .def("register_and_save", &CppBench::RegisterAndSave, py::arg("step"), py::arg("async_") = false,
           "Registers every array and saves (SaveAsync with async_=True): (seconds, seconds of the registrations), timed in C++.")
      .def("wait", &CppBench::Wait)
      .def("close", &CppBench::Close);
}

}  // namespace baton::python
