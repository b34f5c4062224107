// The one check helper for HDF5 calls: a negative return becomes a Status
// (component "ckpt", IOError) naming the call, file:line and HDF5's own
// error stack, innermost message last.
//
// HDF5 prints its error stack to stderr by default; QuietHdf5Errors() turns
// that off for the calling thread's default stack (it is called by every
// entry point of ckpt/hdf5 before the first HDF5 call), so that these
// Statuses, not stderr noise, report a failure.
//
// Threading: HDF5 1.10 here is not thread-safe; all HDF5 calls of a process,
// these included, stay on one thread.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <utility>

#include "baton/status.h"

namespace baton::ckpt::h5 {

void QuietHdf5Errors();

// rc < 0: the failed call's Status (and HDF5's error stack is cleared).
Status CheckH5(int64_t rc, const char* call, const char* file, int line);

// An HDF5 identifier closed by the matching H5?close when it goes out of
// scope (errors on close are ignored here; calls whose close matters, like
// H5Fclose of a file being written, close explicitly with Close()).
class Hid {
 public:
  using Closer = herr_t (*)(hid_t);
  Hid() = default;
  Hid(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Hid(Hid&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)), closer_(o.closer_) {}
  Hid& operator=(Hid&& o) noexcept {
    if (this != &o) {
      Reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
      closer_ = o.closer_;
    }
    return *this;
  }
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;
  ~Hid() { Reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void Reset() {
    if (id_ >= 0 && closer_ != nullptr) closer_(id_);
    id_ = H5I_INVALID_HID;
  }
  // Closes now and reports the close's own failure.
  herr_t Close() {
    herr_t rc = (id_ >= 0 && closer_ != nullptr) ? closer_(id_) : 0;
    id_ = H5I_INVALID_HID;
    return rc;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

}  // namespace baton::ckpt::h5

// Status s = BATON_H5_CHECK(H5Dwrite(...));
#define BATON_H5_CHECK(call) ::baton::ckpt::h5::CheckH5(static_cast<int64_t>(call), #call, __FILE__, __LINE__)

// Opens an identifier into `hid` (a Hid) with `closer`, or returns the failure:
//   Hid f; BATON_H5_OPEN(f, H5Fopen(path, H5F_ACC_RDONLY, fapl), H5Fclose);
#define BATON_H5_OPEN(hid, call, closer)                                                   \
  do {                                                                                     \
    hid_t baton_h5_id_ = (call);                                                           \
    if (baton_h5_id_ < 0) return ::baton::ckpt::h5::CheckH5(-1, #call, __FILE__, __LINE__); \
    (hid) = ::baton::ckpt::h5::Hid(baton_h5_id_, (closer));                                \
  } while (0)
