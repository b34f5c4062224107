// The Checkpointer's registrations (ckpt/checkpointer_impl.h): arrays and
// blobs, checked when registered, and the agreement of all ranks on them
// before a save or a restore.
#include <mpi.h>

#include <string>

#include "baton/log.h"
#include "ckpt/agreement.h"
#include "ckpt/checkpointer_impl.h"
#include "ckpt/checksum.h"
#include "mpi_runtime/mpi_check.h"

namespace baton::ckpt {
namespace {

bool MulOverflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

// Array names become HDF5 dataset names: one path component; a leading
// '.' is baton's own (kRankStateName).
bool ValidArrayName(const std::string& name) {
  return !name.empty() && name.size() <= 255 && !IsReservedName(name) && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

}  // namespace

Status CheckpointerImpl::Register(Registered r) {
  const std::string& name = r.meta.name;
  if (!ValidArrayName(name)) {
    return Status::InvalidArgument(log::kCkpt, "array name \"" + name +
                                                   "\": must be 1-255 bytes, not beginning with '.', without '/'");
  }
  if (r.meta.shape.size() > kMaxDims) {
    return Status::InvalidArgument(log::kCkpt, "array " + name + ": shape " + ShapeText(r.meta.shape) + " has " +
                                                   std::to_string(r.meta.shape.size()) +
                                                   " dimensions, more than HDF5's " + std::to_string(kMaxDims));
  }
  uint64_t n = DTypeSize(r.meta.dtype);
  for (size_t i = 1; i < r.meta.shape.size(); ++i) {
    if (MulOverflows(n, r.meta.shape[i], &n)) {
      return Status::InvalidArgument(log::kCkpt, "array " + name + ": shape " + ShapeText(r.meta.shape) +
                                                     " overflows 64 bits");
    }
  }
  uint64_t total = 0;
  if (MulOverflows(n, r.meta.rows(), &total)) {
    return Status::InvalidArgument(log::kCkpt, "array " + name + ": shape " + ShapeText(r.meta.shape) +
                                                   " overflows 64 bits");
  }
  if (r.first_row > r.meta.rows() || r.rows > r.meta.rows() - r.first_row) {
    return Status::InvalidArgument(log::kCkpt, "array " + name + ": rows [" + std::to_string(r.first_row) + ", " +
                                                   std::to_string(r.first_row + r.rows) + ") outside its " +
                                                   std::to_string(r.meta.rows()) + " rows");
  }
  if (r.data == nullptr && r.rows * n > 0) {
    return Status::InvalidArgument(log::kCkpt, "array " + name + ": null data for " +
                                                   std::to_string(r.rows * n) + " bytes");
  }
  arrays_[name] = std::move(r);
  return Status::OK();
}

Status CheckpointerImpl::RegisterReplicated(const std::string& name, void* data, DType dtype,
                                            const std::vector<uint64_t>& shape) {
  Registered r;
  r.meta.name = name;
  r.meta.dtype = dtype;
  r.meta.shape = shape;
  r.meta.replicated = true;
  r.data = data;
  r.first_row = 0;
  r.rows = r.meta.rows();
  return Register(std::move(r));
}

Status CheckpointerImpl::RegisterSharded(const std::string& name, void* data, DType dtype,
                                         const std::vector<uint64_t>& global_shape, uint64_t first_row,
                                         uint64_t rows) {
  if (global_shape.empty()) {
    return Status::InvalidArgument(log::kCkpt, "sharded array " + name + ": a scalar cannot be sharded");
  }
  Registered r;
  r.meta.name = name;
  r.meta.dtype = dtype;
  r.meta.shape = global_shape;
  r.data = data;
  r.first_row = first_row;
  r.rows = rows;
  return Register(std::move(r));
}

Status CheckpointerImpl::Unregister(const std::string& name) {
  if (arrays_.count(name) == 0 || IsReservedName(name)) {
    return Status::NotFound(log::kCkpt, "unregister: array \"" + name + "\" is not registered");
  }
  if (pending_) {
    return Status::Unavailable(log::kCkpt, "unregister(\"" + name + "\"): save_async(" +
                                               std::to_string(pending_->step) +
                                               ") is not yet committed and uses the registrations it staged; "
                                               "wait() for it first");
  }
  arrays_.erase(name);
  return Status::OK();
}

// One MPI_Allreduce (MAX) of [h, ~h, failed, v, ~v, flag0, flag1]: h
// hashes the call and the registrations, so a rank whose h differs sees
// max(h) != h, and the rank holding the largest h sees max(~h) != ~h; the
// same for v; the MAX of a 0/1 flag is its OR. Only when a rank's own check
// failed does a second round (Agree) carry its message to every rank.
Status CheckpointerImpl::AgreeOnCall(const std::string& call, const Status& local, CallExtra* extra) {
  // Appended in place (no temporary per array: 5,000 arrays took 3 ms of
  // string building); only ranks of one build compare it.
  std::string text = call;
  text += '\0';
  for (const auto& [name, r] : arrays_) {
    text += name;
    text += '\0';
    text += DTypeName(r.meta.dtype);
    const uint64_t dims = r.meta.shape.size();
    text.append(reinterpret_cast<const char*>(&dims), sizeof dims);
    text.append(reinterpret_cast<const char*>(r.meta.shape.data()), dims * sizeof(uint64_t));
    text += r.meta.replicated ? 'R' : 'S';
  }
  const uint64_t h = Xxh3(text.data(), text.size());
  const uint64_t value = extra ? extra->value : 0, flags = extra ? extra->flags : 0;
  constexpr int kFlags = 2;  // the flags in use (bits 0 and 1)
  uint64_t mine[5 + kFlags] = {h, ~h, local.ok() ? 0u : 1u, value, ~value}, most[5 + kFlags] = {};
  for (int f = 0; f < kFlags; ++f) mine[5 + f] = (flags >> f) & 1;
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Allreduce(mine, most, 5 + kFlags, MPI_UINT64_T, MPI_MAX, comm_)));
  if (most[2] != 0) return Agree(comm_, local);  // some rank's own check failed: its message for all
  if (most[0] != h || most[1] != ~h) {
    return Status::InvalidArgument(log::kCkpt, call + ": the ranks registered different arrays (names, dtypes, "
                                                      "shapes or kinds differ) or passed different arguments (" +
                                                      call + " here)");
  }
  if (extra != nullptr) {
    extra->value_differs = most[3] != value || most[4] != ~value;
    extra->any_flags = 0;
    for (int f = 0; f < kFlags; ++f) extra->any_flags |= most[5 + f] << f;
  }
  return Status::OK();
}

}  // namespace baton::ckpt

namespace baton {

Status Checkpointer::CheckElements(const std::string& name, size_t elements, size_t element_bytes, DType dtype,
                                   const std::vector<uint64_t>& shape, std::optional<uint64_t> rows) {
  if (element_bytes != DTypeSize(dtype)) {
    return Status::InvalidArgument(log::kCkpt, "array " + name + ": elements of " + std::to_string(element_bytes) +
                                                   " bytes given as " + std::string(DTypeName(dtype)) + " (" +
                                                   std::to_string(DTypeSize(dtype)) + " bytes)");
  }
  uint64_t want = rows ? *rows : (shape.empty() ? 1 : shape[0]);
  for (size_t i = 1; i < shape.size(); ++i) {
    if (ckpt::MulOverflows(want, shape[i], &want)) {
      return Status::InvalidArgument(log::kCkpt, "array " + name + ": shape " + ckpt::ShapeText(shape) +
                                                     " overflows 64 bits");
    }
  }
  if (elements != want) {
    return Status::InvalidArgument(
        log::kCkpt, "array " + name + ": " + std::to_string(elements) + " elements given, " +
                        (rows ? std::to_string(*rows) + " rows of shape " + ckpt::ShapeText(shape)
                              : "shape " + ckpt::ShapeText(shape)) +
                        " hold " + std::to_string(want));
  }
  return Status::OK();
}

}  // namespace baton

namespace baton::ckpt {

Status CheckpointerImpl::SetUserBlob(std::string bytes) {
  if (bytes.size() > kMaxUserBlobBytes) {
    return Status::InvalidArgument(log::kCkpt, "user blob of " + std::to_string(bytes.size()) +
                                                   " bytes exceeds the limit of " + std::to_string(kMaxUserBlobBytes));
  }
  blob_ = std::move(bytes);
  return Status::OK();
}

Status CheckpointerImpl::SetRankState(std::string bytes) {
  if (bytes.size() > kMaxUserBlobBytes) {
    return Status::InvalidArgument(log::kCkpt, "rank state of " + std::to_string(bytes.size()) +
                                                   " bytes exceeds the limit of " + std::to_string(kMaxUserBlobBytes));
  }
  rank_state_ = std::move(bytes);
  rank_state_set_ = true;
  return Status::OK();
}

}  // namespace baton::ckpt
