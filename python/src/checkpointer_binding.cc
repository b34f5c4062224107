#include "python/src/checkpointer_binding.h"

#include <pybind11/stl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "baton/checkpointer.h"
#include "mpi_runtime/deadline.h"
#include "mpi_runtime/mpi_check.h"
#include "python/src/array_view.h"
#include "python/src/deadline_collectives.h"
#include "python/src/errors.h"
#include "python/src/results.h"
#include "python/src/runtime_binding.h"

namespace baton::python {
namespace {

// The checkpoint directories held by the open ArrayCheckpointers of this
// process (their canonical paths; the GIL guards it). A second one on the
// same directory would wait lock_wait_seconds (120 s) for the writer lock
// its own process holds: refused at once instead.
std::map<std::string, int>& DirsHeldHere() {
  static auto* held = new std::map<std::string, int>();
  return *held;
}

// The directory a Checkpointer with `options` opens (CheckpointOptions::dir,
// else $BATON_CKPT_DIR), canonical so that two spellings of one directory
// match; "" when neither is set (Create says so).
std::string HeldDirKey(const std::string& dir) {
  std::string d = dir;
  if (d.empty()) {
    const char* env = std::getenv("BATON_CKPT_DIR");
    if (env != nullptr) d = env;
  }
  if (d.empty()) return d;
  std::error_code ec;
  std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(d, ec), ec);
  return ec ? d : p.string();
}

// The checkpointer baton.dcp's BatonWriter keeps open on `key` between
// saves (python/baton/dcp/open_checkpointers.py), closed so that another
// opener of this process (a Checkpointer, an ArrayCheckpointer, a
// BatonReader) gets the directory instead of "held by another open
// checkpointer": the writer opens it again at its next save. Every rank
// does the same at the same call, as the writer's opens and closes happen
// on the program's thread in program order. Whether one was closed; its
// failure (a save in flight that did not end) is raised.
bool YieldedByDcpWriter(const std::string& key) {
  py::object module = py::module_::import("sys").attr("modules").attr("get")("baton.dcp.open_checkpointers");
  if (module.is_none()) return false;  // no BatonWriter in this process
  return module.attr("yield_directory")(key).cast<bool>();
}

class PyArrayCheckpointer : public RuntimeUser {
 public:
  PyArrayCheckpointer(py::object runtime, const CheckpointOptions& options)
      : runtime_obj_(std::move(runtime)), runtime_(runtime_obj_.cast<PyRuntime*>()), pid_(::getpid()) {
    Runtime& rt = runtime_->get();
    const std::string key = HeldDirKey(options.dir);
    if (!key.empty() && DirsHeldHere().count(key) != 0 && YieldedByDcpWriter(key)) {
      // baton.dcp's BatonWriter keeps a checkpointer open between saves;
      // it gave the directory up (closed after its save in flight).
    }
    if (!key.empty() && DirsHeldHere().count(key) != 0)
      throw StatusError(Status::Unavailable(
          kComponent, "ArrayCheckpointer: checkpoint directory " + key +
                          " is held by another open checkpointer of this process (pid " +
                          std::to_string(::getpid()) +
                          "): one Checkpointer per directory; close() the other first, or use it"));
    Status s;
    {
      py::gil_scoped_release release;
      s = Checkpointer::Create(rt, options, &ck_);
    }
    Check(s);
    // A communicator of its own for the binding's collectives (close()'s
    // agreement, _allgather_bytes): no other collective of the runtime or
    // of the C++ checkpointer can meet them, so another thread (DCP's
    // async_save) may call this checkpointer while the program's thread
    // runs collectives on the runtime's world (MPI_THREAD_MULTIPLE).
    {
      py::gil_scoped_release release;
      MPI_Request request = MPI_REQUEST_NULL;
      s = BATON_MPI_CHECK(MPI_Comm_idup(rt.world_comm(), &own_comm_, &request));
      if (s.ok()) s = mpi::Deadline(rt.options().collective_timeout).Wait(&request, 1);
    }
    if (!s.ok()) {
      if (s.code() == Code::kTimeout) mpi::MarkAbandoned();
      own_comm_ = MPI_COMM_NULL;  // left to MPI (in flight, or failed)
      py::gil_scoped_release release;
      ck_.reset();
    }
    Check(s.Annotate("ArrayCheckpointer: duplicating the runtime's communicator"));
    held_dir_ = key;
    if (!held_dir_.empty()) ++DirsHeldHere()[held_dir_];
    runtime_->AddUser(this);
  }
  ~PyArrayCheckpointer() override {
    // Garbage collection is no point every rank reaches together: no
    // commit (collective); a save in flight is abandoned with the C++
    // destructor's warning, as before close() committed. A destructor
    // cannot raise.
    try {
      Status failure;
      py::object runtime_ref = CloseKeepingRuntime(/*commit=*/false, &failure);
    } catch (const std::exception& e) {
      PySys_WriteStderr("baton: closing a garbage-collected ArrayCheckpointer: %s\n", e.what());
    }
  }
  PyArrayCheckpointer(const PyArrayCheckpointer&) = delete;
  PyArrayCheckpointer& operator=(const PyArrayCheckpointer&) = delete;

  py::object CloseForRuntime(bool commit, Status* failure) override { return CloseKeepingRuntime(commit, failure); }

  // Marks a call in progress: the Checkpointer is for one thread at a time,
  // and with the GIL released a second Python thread could otherwise enter.
  // busy_ is read and written with the GIL held. Getters take it too: what
  // they read (the blob, the stats, the state of the save in flight) is
  // what a call in another thread is writing.
  class Busy {
   public:
    explicit Busy(PyArrayCheckpointer& c, const char* call) : c_(c) {
      if (c_.busy_)
        throw StatusError(Status::Unavailable(
            kComponent, std::string("ArrayCheckpointer.") + call + ": another thread is in a call of this "
                                                                   "checkpointer (one thread calls a checkpointer)"));
      c_.busy_ = true;
    }
    ~Busy() { c_.busy_ = false; }

   private:
    PyArrayCheckpointer& c_;
  };

  Checkpointer& get() {
    if (!ck_) ThrowInvalid("ArrayCheckpointer is closed");
    return *ck_;
  }
  bool closed() const { return ck_ == nullptr; }

  // Runs `call` on the checkpointer with the GIL released and raises its failure.
  template <typename F>
  void Run(const char* what, F call) {
    Busy busy(*this, what);
    Checkpointer& ck = get();
    if (TouchesArrays(what)) CheckUnmoved(what);
    Status s;
    {
      py::gil_scoped_release release;
      s = call(ck);
    }
    Check(s);
  }

  // The calls that read or write the registered arrays' memory: each checks
  // every array first (CheckUnmoved). rollback() copies the snapshot into
  // them (issue 46 item 4: it did not check, and wrote into freed memory);
  // wait() and close() commit the staging copy, read_metadata reads files.
  static bool TouchesArrays(std::string_view call) {
    return call == "save" || call == "save_async" || call == "restore" || call == "rollback";
  }

  // Every registered array still at the memory and shape it was registered
  // with: a tensor whose storage moved since (resize_, set_, a NumPy
  // resize) would be read or written at freed memory. Asked again of the
  // object before every use (one view: no copy); InvalidArgument naming the
  // array otherwise (issue 41 item 9).
  void CheckUnmoved(const char* what) {
    for (const auto& [name, view] : arrays_) {
      if (StillAt(view)) continue;
      const ArrayView now = ViewArray(name, view.owner, std::string(DTypeName(view.dtype)));
      if (now.data != view.data || now.shape != view.shape)
        ThrowInvalid(std::string(what) + ": array '" + name + "' moved since it was registered (shape " +
                     ShapeText(view.shape) + ", now " + ShapeText(now.shape) +
                     (now.data != view.data ? ", its memory reallocated" : "") +
                     ": resize_, set_ or a NumPy resize?); register it again");
    }
  }

  // As Run, for the calls that commit a version (save, save_async, wait,
  // wait_or_abandon). Ctrl-C while the call runs (the GIL released: Python's
  // handler only notes it) is held until the call ended on this rank, so the
  // call is never cut between the ranks' commit steps; then the
  // KeyboardInterrupt is raised, saying whether the version was committed.
  // step: the version the call saves; kInFlight: the save in flight.
  static constexpr int64_t kInFlight = -2;
  template <typename F>
  void RunCommitting(const char* what, int64_t step, F call) {
    {
      Busy busy(*this, what);
      Checkpointer& ck = get();
      if (step == kInFlight) step = ck.async_status().step;
      if (TouchesArrays(what)) CheckUnmoved(what);
      Status s;
      {
        py::gil_scoped_release release;
        s = call(ck);
      }
      Check(s);  // a failure is raised as such; a Ctrl-C during it comes after, from Python
    }
    if (PyErr_CheckSignals() == 0) return;
    if (!PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) throw py::error_already_set();
    PyErr_Clear();
    const std::string committed =
        std::string(what) == "save_async"
            ? "version " + std::to_string(step) + " is staged and being written (its commit comes with the next "
                                                  "save, restore, wait or close)"
        : step >= 0 ? "version " + std::to_string(step) + " is committed"
                    : "no save was in flight";
    PyErr_SetString(PyExc_KeyboardInterrupt,
                    ("Ctrl-C during ArrayCheckpointer." + std::string(what) + "(): held until the call ended; it "
                     "succeeded: " + committed).c_str());
    throw py::error_already_set();
  }

  void Close(bool commit) {
    Status failure;
    py::object runtime_ref = CloseKeepingRuntime(commit, &failure);
    runtime_ref = py::none();  // may be the Runtime's last reference: dropped after every use of this
    Check(failure);
  }

  void RegisterReplicated(const std::string& name, const py::handle& array, const std::optional<std::string>& dtype) {
    Busy busy(*this, "register_replicated");
    ArrayView v = ViewArray(name, array, dtype);
    Check(get().RegisterReplicated(name, v.data, v.dtype, v.shape));
    arrays_[name] = std::move(v);
  }

  void RegisterSharded(const std::string& name, const py::handle& array, uint64_t offset,
                       const std::optional<std::vector<uint64_t>>& global_shape,
                       const std::optional<std::string>& dtype) {
    Busy busy(*this, "register_sharded");
    ArrayView v = ViewArray(name, array, dtype);
    const std::string quoted = "array '" + name + "'";
    if (v.shape.empty())
      ThrowInvalid(quoted + " is a scalar (0-d): a sharded array is split along dim 0; register it replicated");
    const uint64_t rows = v.shape[0];
    std::vector<uint64_t> global;
    if (global_shape) {
      global = *global_shape;
      if (global.size() != v.shape.size() || !std::equal(global.begin() + 1, global.end(), v.shape.begin() + 1))
        ThrowInvalid(quoted + ": global_shape " + ShapeText(global) + " does not fit this rank's shard of shape " +
                     ShapeText(v.shape) + " (the dimensions after the first must be the same)");
      if (offset > global[0] || rows > global[0] - offset)
        ThrowInvalid(quoted + ": rows [" + std::to_string(offset) + ", " + std::to_string(offset + rows) +
                     ") lie outside dim 0 of global_shape " + ShapeText(global));
    } else {
      global = v.shape;
      global[0] = AgreedEnd(name, offset + rows);
    }
    Check(get().RegisterSharded(name, v.data, v.dtype, global, offset, rows));
    arrays_[name] = std::move(v);
  }

  std::optional<int64_t> Restore(std::optional<int64_t> step, const std::optional<std::vector<std::string>>& arrays,
                                 bool drop_rank_state_on_resize, int from_level, const std::string& version,
                                 const std::string& older_than, bool verify_before_write) {
    RestoreOptions options;
    options.step = step;
    options.version = version;
    options.older_than = older_than;
    options.verify_before_write = verify_before_write;
    if (arrays) options.arrays = *arrays;
    options.drop_rank_state_on_resize = drop_rank_state_on_resize;
    options.from_level = from_level;
    RestoreResult result;
    // Kept when the restore raises too: the versions it skipped, and whether
    // each failure was counted toward quarantine, are the caller's to report
    // (a pinned restore's one failure was reported as "not counted").
    try {
      Run("restore", [&](Checkpointer& ck) { return ck.Restore(options, &result); });
    } catch (...) {
      last_restore_ = result;
      throw;
    }
    last_restore_ = result;
    return result.step;
  }

  py::object ReadMetadata(std::optional<int64_t> step, const std::string& version, const std::string& older_than,
                          bool as_restore, int from_level) {
    RestoreOptions options;
    options.from_level = from_level;
    options.step = step;
    options.version = version;
    options.older_than = older_than;
    options.as_restore = as_restore;
    std::optional<CheckpointMetadata> meta;
    Run("read_metadata", [&](Checkpointer& ck) { return ck.ReadMetadata(options, &meta); });
    if (!meta) return py::none();
    return MetadataDict(*meta);
  }

  void Unregister(const std::string& name) {
    Busy busy(*this, "unregister");
    Check(get().Unregister(name));
    arrays_.erase(name);  // the exporter, with the GIL: the array's memory is no longer held
  }

  // Every rank's `data` over this checkpointer's own communicator (not the
  // runtime's world): for a caller on another thread than the program's.
  py::list AllgatherOwn(const py::bytes& data, const std::string& what, std::optional<size_t> fixed) {
    Busy busy(*this, "_allgather_bytes");
    get();  // closed: InvalidArgument
    return AllgatherBytesOn(runtime_->get(), own_comm_, data, what, fixed);
  }

  py::object LastRestore() const {
    if (!last_restore_) return py::none();
    return RestoreDict(*last_restore_);
  }

  std::string AsyncStatus() {
    Busy busy(*this, "async_status");
    switch (get().async_status().state) {
      case AsyncSaveStatus::State::kIdle: return "idle";
      case AsyncSaveStatus::State::kWriting: return "writing";
      case AsyncSaveStatus::State::kWritten: return "written";
      case AsyncSaveStatus::State::kFailed: return "failed";
    }
    return "unknown";
  }

  std::vector<std::string> Registered() const {
    std::vector<std::string> names;
    for (const auto& [name, view] : arrays_) names.push_back(name);
    return names;
  }

 private:
  // Ends the checkpointer; hands back its reference to the Runtime (the
  // caller drops it last). With `commit`, a save_async not yet committed is
  // committed first, every rank doing the same at its close (collective
  // then), bounded by the runtime's collective timeout: abandoning it would
  // lose a version the program asked for. Its failure goes into *failure;
  // the rest of the close happens anyway. Without (an exception unwinding,
  // garbage collection) it is abandoned, as the C++ destructor does. In a
  // child forked after the checkpointer was made nothing is touched: the
  // writer thread, the lock and MPI are the parent's.
  py::object CloseKeepingRuntime(bool commit, Status* failure) {
    if (ck_ && !Foreign()) {
      Busy busy(*this, "close");
      const AsyncSaveStatus in_flight = ck_->async_status();
      if (commit && in_flight.state != AsyncSaveStatus::State::kIdle && runtime_ != nullptr &&
          !runtime_->closed()) {
        Runtime& rt = runtime_->get();
        const double deadline = rt.options().collective_timeout;
        const std::string what = "close(): committing save_async(" + std::to_string(in_flight.step) + ")";
        Status s;
        bool timed_out = false;
        {
          py::gil_scoped_release release;
          // First every rank must be closing too, within the deadline: the
          // commit's own collectives (Checkpointer::Wait) have none, and a
          // rank that closes alone (its sys.exit while the others train)
          // would wait there for ever. On the heap: after a timeout MPI may
          // still write it.
          auto* buf = new int[2]{1, 0};
          MPI_Request request = MPI_REQUEST_NULL;
          s = BATON_MPI_CHECK(MPI_Iallreduce(&buf[0], &buf[1], 1, MPI_INT, MPI_MIN, own_comm_, &request));
          if (s.ok()) s = mpi::Deadline(deadline).Wait(&request, 1);
          if (s.code() == Code::kTimeout) {
            // Left in flight: MPI_Finalize would wait for the absent rank
            // (the process exits without it) and own_comm_ stays.
            mpi::MarkAbandoned();
            own_comm_ = MPI_COMM_NULL;
            timed_out = true;
            s = mpi::TimeoutStatus(&rt, what + " (not committed; abandoned): waiting for every rank to close",
                                   deadline);
          } else {
            delete[] buf;
            if (s.ok()) s = ck_->Wait(deadline);
          }
        }
        if (!s.ok()) *failure = timed_out ? s : s.Annotate(what + " (not committed)");
      }
      py::gil_scoped_release release;  // waits for the background writer
      ck_.reset();
    } else if (ck_) {
      (void)ck_.release();  // a forked child: the parent's objects, left as they are
    }
    if (own_comm_ != MPI_COMM_NULL && !Foreign()) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized && !mpi::Failed()) MPI_Comm_free(&own_comm_);
    }
    own_comm_ = MPI_COMM_NULL;
    if (!held_dir_.empty() && !Foreign()) {
      auto it = DirsHeldHere().find(held_dir_);
      if (it != DirsHeldHere().end() && --it->second == 0) DirsHeldHere().erase(it);
    }
    held_dir_.clear();
    arrays_.clear();  // the exporters, with the GIL
    if (runtime_ != nullptr) runtime_->RemoveUser(this);
    runtime_ = nullptr;
    py::object runtime_ref = std::move(runtime_obj_);
    runtime_obj_ = py::none();
    return runtime_ref;
  }

  bool Foreign() const { return ::getpid() != pid_; }

  // dim 0 of a sharded array registered without global_shape: the largest
  // end row over the ranks. An all-reduce on the runtime's world under its
  // collective deadline (past it the process exits 75, as the runtime's own
  // collectives under OnTimeout::kExit do: MPI cannot cancel the call).
  uint64_t AgreedEnd(const std::string& name, uint64_t end) {
    Runtime& rt = runtime_->get();
    // On the heap: after a timeout MPI may still write it.
    auto* buf = new uint64_t[2]{end, 0};
    Status s;
    {
      py::gil_scoped_release release;
      MPI_Request request = MPI_REQUEST_NULL;
      s = BATON_MPI_CHECK(MPI_Iallreduce(&buf[0], &buf[1], 1, MPI_UINT64_T, MPI_MAX, rt.world_comm(), &request));
      if (s.ok()) s = mpi::Deadline(rt.options().collective_timeout).Wait(&request, 1);
      if (s.code() == Code::kTimeout)
        mpi::ExitForRequeue(mpi::TimeoutStatus(&rt, "register_sharded('" + name + "') agreeing on dim 0",
                                               rt.options().collective_timeout));
    }
    Check(s.Annotate("register_sharded('" + name + "'): agreeing on dim 0 of its global shape"));
    const uint64_t agreed = buf[1];
    delete[] buf;
    return agreed;
  }

  py::object runtime_obj_;  // keeps the Runtime alive while this is open
  PyRuntime* runtime_ = nullptr;
  long pid_;              // the process that made it (a forked child's copy is not its own)
  MPI_Comm own_comm_ = MPI_COMM_NULL;  // close()'s agreement, _allgather_bytes (a dup of the runtime's world)
  std::string held_dir_;  // its key in DirsHeldHere
  std::unique_ptr<Checkpointer> ck_;
  std::map<std::string, ArrayView> arrays_;
  std::optional<RestoreResult> last_restore_;
  bool busy_ = false;
};

std::string PathText(const py::object& path) {
  return py::str(py::module_::import("os").attr("fspath")(path)).cast<std::string>();
}

}  // namespace

void BindCheckpointer(py::module_& m) {
  m.def(
      "_committed_versions",
      [](const std::string& dir) {
        std::vector<CommittedVersion> versions;
        Status s;
        {
          py::gil_scoped_release unlocked;  // a listing of a shared file system may wait
          s = ListCommittedVersions(dir, &versions);
        }
        if (s.code() != Code::kNotFound) Check(s);
        py::list out;
        for (const CommittedVersion& v : versions) out.append(py::make_tuple(v.name, v.step));
        return out;
      },
      py::arg("dir"),
      "[(name, step)] of dir's committed versions, oldest first ([] when dir does not exist): the listing "
      "and version-name rule a restore uses (baton::ListCommittedVersions). No MPI; nothing written.");
  py::class_<PyArrayCheckpointer>(m, "ArrayCheckpointer", R"(Atomically committed, verified checkpoints of NumPy arrays and tensors.

ArrayCheckpointer(runtime, dir=None, local_dir=None, group_size=0, keep=3,
                  level2=False, shared_every=1, local_keep=2, run_id="",
                  verify_replicas=True, peer_timeout=0.0, read_only=False)

The low-level API (baton::Checkpointer): register arrays by name, then save,
save_async and restore them all at once. Collective: every rank makes it, and
calls register_*, save, save_async, wait, restore and read_metadata in the
same order with the same names.

    ck = baton.ArrayCheckpointer(rt, dir="/shared/ckpt")
    ck.register_replicated("w", w)                 # numpy array or tensor, same on every rank
    ck.register_sharded("emb", emb_rows, offset=first_row)   # this rank's rows of dim 0
    step = ck.restore()                            # None on a first run
    for step in range(step or 0, steps):
        train(step)
        if (step + 1) % 100 == 0:
            ck.save(step + 1)                      # or ck.save_async(step + 1)
    ck.wait(); ck.close()

A step is the number of training steps completed: save(n) after steps 0..n-1.

Arrays: NumPy arrays (buffer protocol) or objects with __dlpack__
(torch.Tensor, any dtype baton has, bf16 included); C-contiguous, writable,
in host memory. Registration keeps a reference and copies nothing: what the
array holds at save() is saved; restore() writes into it.

dir: the shared checkpoint directory (str or path); None: $BATON_CKPT_DIR.
local_dir: the node-local directory of level 2 (given: level 2 on); None:
  $BATON_LOCAL_DIR when level2=True (the job opts in to the directory the
  plugin offers), else level 2 off.
group_size: ranks per shard file (0: the ranks of a node).
keep: committed versions kept in dir; local_keep: versions kept in local_dir.
shared_every: with level 2, every n-th save also goes to dir.
run_id: the run the directory belongs to ("" : the directory's own).
verify_replicas: each save checks that replicated arrays are the same on
  every rank (one hash pass each).
peer_timeout: seconds of a silent peer after which the waiting ranks exit 75
  (0: the runtime's collective timeout).
read_only: a reader's open: dir must exist (baton.NotFound, nothing
  created) and nothing is written there (no lock, run file, event log;
  level 2 off); save fails.

Failures raise baton.Error subclasses naming rank, host and the value.
The GIL is released while a call does I/O or waits for other ranks; one
thread at a time calls a checkpointer, getters included (a second thread
gets baton.Unavailable at once). One checkpointer per directory: a second
one on a directory this process holds is baton.Unavailable at once.)")
      .def(py::init([](py::object runtime, py::object dir, py::object local_dir, int group_size, int keep, bool level2,
                       int shared_every, int local_keep, std::string run_id, bool verify_replicas,
                       double peer_timeout, bool read_only) {
             if (!py::isinstance<PyRuntime>(runtime))
               ThrowInvalid("ArrayCheckpointer: runtime must be a baton.Runtime, not " +
                            std::string(py::str(py::type::handle_of(runtime).attr("__name__"))));
             CheckpointOptions o;
             if (!dir.is_none()) o.dir = PathText(dir);
             if (!local_dir.is_none()) o.local_dir = PathText(local_dir);
             o.group_size = group_size;
             o.keep = keep;
             o.level2 = level2;
             o.shared_every = shared_every;
             o.local_keep = local_keep;
             o.run_id = std::move(run_id);
             o.verify_replicas = verify_replicas;
             o.peer_timeout = peer_timeout;
             o.read_only = read_only;
             return std::make_unique<PyArrayCheckpointer>(std::move(runtime), o);
           }),
           py::arg("runtime"), py::arg("dir") = py::none(), py::arg("local_dir") = py::none(),
           py::arg("group_size") = 0, py::arg("keep") = 3, py::arg("level2") = false, py::arg("shared_every") = 1,
           py::arg("local_keep") = 2, py::arg("run_id") = "", py::arg("verify_replicas") = true,
           py::arg("peer_timeout") = 0.0, py::arg("read_only") = false)
      .def("register_replicated", &PyArrayCheckpointer::RegisterReplicated, py::arg("name"), py::arg("array"),
           py::arg("dtype") = py::none(),
           R"(Registers an array that every rank holds alike (DDP's parameters).

Written once in total, its rows spread over the ranks; restored on every rank.
name: 1-255 bytes, no '/', not starting with '.'; registering a name again
replaces the earlier registration. dtype: a baton dtype name that overrides
the array's own, for elements of the same size (raw uint16 bits as "bf16").
Not collective, but every rank registers the same names.)")
      .def("register_sharded", &PyArrayCheckpointer::RegisterSharded, py::arg("name"), py::arg("array"),
           py::arg("offset"), py::arg("global_shape") = py::none(), py::arg("dtype") = py::none(),
           R"(Registers this rank's shard of an array split along dim 0.

array holds rows [offset, offset + len(array)) of the global array; over all
ranks the row ranges must tile dim 0 exactly (checked at save). A restore at
another world size reshards (each rank gets the rows it registered).
global_shape: the whole array's shape (its dims after the first equal the
  shard's). None: the dims of the shard, dim 0 the largest offset + rows of
  any rank, agreed collectively (then every rank must register its shards in
  the same order). dtype: as in register_replicated.)")
      .def(
          "save",
          [](PyArrayCheckpointer& c, int64_t step) {
            c.RunCommitting("save", step, [&](Checkpointer& ck) { return ck.Save(step); });
          },
          py::arg("step"),
          R"(Writes every registered array, the user blob and the rank state as version
`step` (training steps completed, >= 0) and commits it atomically; keeps the
newest `keep` versions. Collective. On failure nothing is committed and every
rank raises the same exception.

Ctrl-C (SIGINT) during the call is held until the save ended on this rank,
so that it is never cut between the ranks' commit steps; then
KeyboardInterrupt is raised, its text saying the version is committed.)")
      .def(
          "save_async",
          [](PyArrayCheckpointer& c, int64_t step) {
            c.RunCommitting("save_async", step, [&](Checkpointer& ck) { return ck.SaveAsync(step); });
          },
          py::arg("step"),
          R"(Starts saving version `step` in the background and returns.

First completes (commits) the save in flight, if any; then copies every
registered array into one staging copy: changes to the arrays after it
returns never reach this version. A background thread writes the copy; the
next save, save_async, restore, read_metadata or wait commits it (and raises
its failure on every rank). close() commits it too (collective then). Collective.
Memory: one copy of this rank's arrays. Ctrl-C meanwhile: as in save().)")
      .def(
          "wait",
          [](PyArrayCheckpointer& c, std::optional<double> timeout) {
            const double t = timeout ? *timeout : std::numeric_limits<double>::infinity();
            c.RunCommitting("wait", PyArrayCheckpointer::kInFlight, [&](Checkpointer& ck) { return ck.Wait(t); });
          },
          py::arg("timeout") = py::none(),
          R"(Completes the save in flight: waits until every rank's write ended (or
`timeout` seconds passed: baton.TimeoutError on every rank, the save stays in
flight), then commits it. Returns at once when none is in flight. Collective.
close() (and the end of a with block, and the exit) does it too, bounded by
the runtime's collective_timeout. Ctrl-C meanwhile: as in save().)")
      .def(
          "wait_or_abandon",
          [](PyArrayCheckpointer& c, double timeout) {
            c.RunCommitting("wait_or_abandon", PyArrayCheckpointer::kInFlight,
                            [&](Checkpointer& ck) { return ck.WaitOrAbandon(timeout); });
          },
          py::arg("timeout"),
          R"(For an agreed stop: as wait(), but a save not written everywhere within
`timeout` seconds is abandoned (its directory removed) and baton.Aborted is
raised on every rank. Returns within about timeout plus one 64 MiB slab.)")
      .def("async_status", &PyArrayCheckpointer::AsyncStatus,
           R"(This rank's save in flight, as this rank knows it: "idle", "writing",
"written" (waits for the next collective call to commit) or "failed" (every
rank learns it at the next call). Local: no MPI, no waiting (baton.Unavailable
while another thread is in a call of this checkpointer).)")
      .def("unregister", &PyArrayCheckpointer::Unregister, py::arg("name"),
           R"(Drops array `name`'s registration: later calls neither save nor restore
it, and the array is no longer referenced. Not collective, but every rank
unregisters the same names. baton.NotFound when it is not registered;
baton.Unavailable while a save_async is not yet committed (wait() first).)")
      .def("_allgather_bytes", &PyArrayCheckpointer::AllgatherOwn, py::arg("data"), py::arg("what"),
           py::arg("fixed") = py::none(),
           R"(Every rank's `data` (bytes), in rank order, over this checkpointer's own
communicator (a duplicate of the runtime's world), under the runtime's
collective_timeout as baton._baton._allgather_bytes. Collective. For a thread
other than the program's (baton.dcp.BatonWriter under dcp.async_save): its
collectives never meet the program's on the runtime's world.)")
      .def(
          "rollback",
          [](PyArrayCheckpointer& c) {
            int64_t step = -1;
            c.Run("rollback", [&](Checkpointer& ck) { return ck.Rollback(&step); });
            return step;
          },
          R"(Restores the newest save_async's in-memory snapshot into the registered
arrays, with no I/O (a NaN loss); returns its step. Collective. baton.NotFound
when there is none.)")
      .def("restore", &PyArrayCheckpointer::Restore, py::arg("step") = py::none(), py::arg("arrays") = py::none(),
           py::arg("drop_rank_state_on_resize") = false, py::arg("from_level") = 0, py::kw_only(),
           py::arg("version") = "", py::arg("older_than") = "", py::arg("verify_before_write") = false,
           R"(Restores the newest version every rank can read and verify into the
registered arrays (in place), the user blob and the rank state; returns its
step, or None when the directory holds no version (a first run).

step: that step's newest version instead of the newest (baton.NotFound if none).
arrays: names to restore (a partial restore); None: every registered array,
  and the version must hold exactly those.
drop_rank_state_on_resize: at another world size, restore without the rank
  state instead of raising InvalidArgument.
from_level: 0 the fastest level that holds the version, 3 the shared dir only.
version: that version only (a name such as 'v00000012-s400', the last part of
  last_restore()['version_path']): its failure raises, no fallback.
older_than: only versions committed before that one (None when there is none).
verify_before_write: every rank reads and verifies its rows before any is
  written to a registered array (then reads them again, verified, into them):
  a version that fails to verify leaves every array untouched. False: each
  chunk goes in as it is read, verified, and a failed version leaves some.
A version that fails verification is skipped for the next older one
(last_restore()['fallbacks']). Collective.)")
      .def("last_restore", &PyArrayCheckpointer::LastRestore,
           R"(What the last restore() did, or None before one: {step, version_path,
level (2 node-local, 3 shared, 0 nothing), fallbacks [{path, step, reason,
code, counted}], quarantined, rank_state_dropped}. After a restore that
raised: what it tried (step None, the versions that failed).)")
      .def("read_metadata", &PyArrayCheckpointer::ReadMetadata, py::arg("step") = py::none(), py::kw_only(),
           py::arg("version") = "", py::arg("older_than") = "", py::arg("as_restore") = false,
           py::arg("from_level") = 0,
           R"(The metadata of the version restore(step, version=, older_than=, from_level=) would try first, read from its
manifest, or None: {step, version_path, world_size, time, arrays [{name, dtype
(a baton name), shape (tuple), replicated}], user_blob_bytes, user_blob (the
bytes, verified with the manifest), has_rank_state, skipped (newer versions
passed over, as last_restore()'s fallbacks)}. For allocating arrays before
registering them, or planning a restore of that version (restore(version=)).
as_restore=True: found as restore() finds it: a damaged manifest passed over
is counted toward its quarantine, and where none is left after failures the
call raises restore()'s baton.NotFound instead of returning None. Collective.)")
      .def_property(
          "rank_state", [](PyArrayCheckpointer& c) {
            PyArrayCheckpointer::Busy busy(c, "rank_state");
            return py::bytes(c.get().rank_state());
          },
          [](PyArrayCheckpointer& c, const py::bytes& b) {
            PyArrayCheckpointer::Busy busy(c, "rank_state");
            Check(c.get().SetRankState(std::string(b)));
          },
          R"(This rank's own bytes (an RNG state, a loader cursor), saved with every
later save and given back to this rank by restore at the same world size.
At most 64 MiB.)")
      .def_property(
          "user_blob", [](PyArrayCheckpointer& c) {
            PyArrayCheckpointer::Busy busy(c, "user_blob");
            return py::bytes(c.get().user_blob());
          },
          [](PyArrayCheckpointer& c, const py::bytes& b) {
            PyArrayCheckpointer::Busy busy(c, "user_blob");
            Check(c.get().SetUserBlob(std::string(b)));
          },
          "Job-wide bytes saved with the next save (rank 0's are kept) and given back to every rank by restore. "
          "At most 64 MiB.")
      .def(
          "last_stats", [](PyArrayCheckpointer& c) {
            PyArrayCheckpointer::Busy busy(c, "last_stats");
            return StatsDict(c.get().last_stats());
          },
          R"(What the last save or restore did on this rank: step, version_path, bytes,
total_bytes, bytes_read (restore: whole chunks read to verify them), seconds, fallbacks, level, shared,
bytes_level2, bytes_partner,
bytes_level3 (and total_ of each), phases {name: seconds}.)")
      .def_property_readonly("registered", &PyArrayCheckpointer::Registered, "The registered names, sorted.")
      .def_property_readonly("dir", [](PyArrayCheckpointer& c) {
                               PyArrayCheckpointer::Busy busy(c, "dir");
                               return c.get().dir();
                             },
                             "The checkpoint directory.")
      .def_property_readonly("run_id", [](PyArrayCheckpointer& c) {
                               PyArrayCheckpointer::Busy busy(c, "run_id");
                               return c.get().run_id();
                             },
                             "The directory's run id, the same on every rank.")
      .def_property_readonly("closed", &PyArrayCheckpointer::closed, "Whether close() was called.")
      .def(
          "close", [](PyArrayCheckpointer& c) { c.Close(/*commit=*/true); },
           R"(Ends the checkpointer: commits a save_async not yet committed, as wait()
with the runtime's collective_timeout (collective then: every rank closes;
its failure is raised after the rest of the close), releases the directory's
lock and the registered arrays. Not collective when no save is in flight;
closing twice is harmless. The end of a with block, Runtime.close() and the
interpreter's exit close it the same way; while an exception leaves a with
block (the other ranks are elsewhere) and when it is garbage-collected, the
save in flight is abandoned instead, with a warning in the log.)")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyArrayCheckpointer& c, const py::object& type, const py::object&, const py::object&) {
        // While an exception unwinds the other ranks are not closing: no
        // commit (collective, it would wait for them), the exception goes on.
        c.Close(/*commit=*/type.is_none());
      });
}

}  // namespace baton::python
