#include "python/src/deadline_collectives.h"

#include <mpi.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "mpi_runtime/deadline.h"
#include "mpi_runtime/mpi_check.h"
#include "python/src/errors.h"
#include "python/src/runtime_binding.h"

namespace baton::python {
namespace {

namespace py = pybind11;

// Waits for `request` under `deadline`. Past it the process exits 75 (as
// the runtime's own collectives under OnTimeout::kExit and
// ArrayCheckpointer's dim-0 agreement do): MPI cannot cancel a collective,
// so its buffers are left to it and nothing after could be trusted.
Status WaitOrExit(Runtime& rt, const mpi::Deadline& deadline, MPI_Request* request, const std::string& what) {
  Status s = deadline.Wait(request, 1);
  if (s.code() == Code::kTimeout)
    mpi::ExitForRequeue(mpi::TimeoutStatus(&rt, what, rt.options().collective_timeout));
  return s;
}

// Every rank's `fixed` bytes: one MPI_Iallgather (a digest: no lengths to
// exchange first).
py::list AllgatherFixed(Runtime& rt, MPI_Comm comm, const std::string& mine, const std::string& what) {
  const size_t size = static_cast<size_t>(rt.size());
  std::vector<char> all(std::max<size_t>(size * mine.size(), 1));
  Status s;
  {
    py::gil_scoped_release release;
    const mpi::Deadline deadline(rt.options().collective_timeout);
    MPI_Request request = MPI_REQUEST_NULL;
    s = BATON_MPI_CHECK(MPI_Iallgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(),
                                       static_cast<int>(mine.size()), MPI_BYTE, comm, &request));
    if (s.ok()) s = WaitOrExit(rt, deadline, &request, what);
  }
  Check(s.Annotate(what));
  py::list out;
  for (size_t r = 0; r < size; ++r) out.append(py::bytes(all.data() + r * mine.size(), mine.size()));
  return out;
}

}  // namespace

py::list AllgatherBytesOn(Runtime& rt, MPI_Comm comm, const py::bytes& data, const std::string& what,
                          std::optional<size_t> fixed) {
  const size_t size = static_cast<size_t>(rt.size());
  const std::string mine = data;
  if (mine.size() > (static_cast<size_t>(1) << 30))
    ThrowInvalid(what + ": " + std::to_string(mine.size()) + " bytes to gather (at most 1 GiB)");
  if (fixed) {
    if (mine.size() != *fixed)
      ThrowInvalid(what + ": " + std::to_string(mine.size()) + " bytes, not the fixed " + std::to_string(*fixed));
    return AllgatherFixed(rt, comm, mine, what);
  }
  // On the heap and never freed when the process exits at the deadline:
  // MPI may still write them until then.
  auto* lengths = new std::vector<int>(size + 1, 0);
  (*lengths)[size] = static_cast<int>(mine.size());
  std::vector<int> displs(size, 0);
  std::vector<char> all;
  Status s;
  {
    py::gil_scoped_release release;
    const mpi::Deadline deadline(rt.options().collective_timeout);
    MPI_Request request = MPI_REQUEST_NULL;
    s = BATON_MPI_CHECK(
        MPI_Iallgather(&(*lengths)[size], 1, MPI_INT, lengths->data(), 1, MPI_INT, comm, &request));
    if (s.ok()) s = WaitOrExit(rt, deadline, &request, what);
    if (s.ok()) {
      size_t total = 0;
      for (size_t r = 0; r < size; ++r) {
        displs[r] = static_cast<int>(total);
        total += static_cast<size_t>((*lengths)[r]);
      }
      if (total > static_cast<size_t>(INT32_MAX)) {
        s = Status::InvalidArgument("python", what + ": " + std::to_string(total) + " bytes over the ranks");
      } else {
        all.resize(std::max<size_t>(total, 1));
        s = BATON_MPI_CHECK(MPI_Iallgatherv(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(),
                                            lengths->data(), displs.data(), MPI_BYTE, comm, &request));
        if (s.ok()) s = WaitOrExit(rt, deadline, &request, what);
      }
    }
  }
  Check(s.Annotate(what));
  py::list out;
  for (size_t r = 0; r < size; ++r)
    out.append(py::bytes(all.data() + displs[r], static_cast<size_t>((*lengths)[r])));
  delete lengths;
  return out;
}

namespace {

// _allgather_bytes: on the runtime's world communicator, for the calls the
// program's own thread makes (the plans' agreement).
py::list AllgatherBytes(PyRuntime& runtime, const py::bytes& data, const std::string& what,
                        std::optional<size_t> fixed) {
  Runtime& rt = runtime.get();
  return AllgatherBytesOn(rt, rt.world_comm(), data, what, fixed);
}

// MPI_Ibcast of a writable buffer's bytes from `root`, in pieces of at
// most 1 GiB, under one collective deadline.
void Broadcast(PyRuntime& runtime, const py::buffer& buffer, int root, const std::string& what) {
  Runtime& rt = runtime.get();
  if (root < 0 || root >= rt.size())
    ThrowInvalid(what + ": root " + std::to_string(root) + " is not a rank (0.." + std::to_string(rt.size() - 1) +
                 ")");
  py::buffer_info info = buffer.request(/*writable=*/true);
  if (info.ndim != 1 || info.strides[0] != info.itemsize)
    ThrowInvalid(what + ": the buffer is not 1-d and contiguous (give its bytes, e.g. a flat uint8 view)");
  char* bytes = static_cast<char*>(info.ptr);
  const size_t n = static_cast<size_t>(info.size) * static_cast<size_t>(info.itemsize);
  Status s;
  {
    py::gil_scoped_release release;
    const mpi::Deadline deadline(rt.options().collective_timeout);
    constexpr size_t kPiece = static_cast<size_t>(1) << 30;
    for (size_t at = 0; at < n && s.ok(); at += kPiece) {
      MPI_Request request = MPI_REQUEST_NULL;
      const int count = static_cast<int>(std::min(kPiece, n - at));
      s = BATON_MPI_CHECK(MPI_Ibcast(bytes + at, count, MPI_BYTE, root, rt.world_comm(), &request));
      if (s.ok()) s = WaitOrExit(rt, deadline, &request, what);
    }
  }
  Check(s.Annotate(what));
}

}  // namespace

void BindDeadlineCollectives(py::module_& m) {
  m.def("_allgather_bytes", &AllgatherBytes, py::arg("runtime"), py::arg("data"), py::arg("what"),
        py::arg("fixed") = py::none(),
        R"(Every rank's `data` (bytes), in rank order (collective: every rank calls it).

fixed: every rank's data has this many bytes (one all-gather instead of two).

On the runtime's world communicator, under its collective_timeout: past it
the process exits 75 naming `what` and the ranks not answering heartbeats.
The state-dict layer agrees on its plans with it.)");
  m.def("_broadcast", &Broadcast, py::arg("runtime"), py::arg("buffer"), py::arg("root"), py::arg("what"),
        R"(Overwrites `buffer` (a writable contiguous buffer, the same size on every
rank) with rank `root`'s bytes (collective), under the runtime's
collective_timeout as _allgather_bytes.)");
}

}  // namespace baton::python
