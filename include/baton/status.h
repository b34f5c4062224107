// baton::Status: the result of every call that crosses a library boundary.
//
// Modelled on leveldb's Status: a cheap value, OK or a code plus a message.
// [[nodiscard]]: ignoring one is a compile error (-Werror); IgnoreError()
// states that a caller drops it on purpose.
// A failed Status also records where it was made (component, rank, host,
// job), so that a message read in one rank's log of a thousand still says
// which rank and which value were wrong. baton never aborts the process on
// bad input; it returns one of these instead.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <string_view>

namespace baton {

enum class Code {
  kOk = 0,
  kInvalidArgument,  // bad input: an option, an environment variable, a file
  kNotFound,
  kCorruption,       // data that fails its checksum or its format
  kIOError,
  kTimeout,          // a deadline passed
  kUnavailable,      // a resource (GPU, MPI thread level) is not there
  kAborted,          // another rank failed; this one stops with it
  kInternal,         // a bug in baton
};

std::string_view CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() noexcept = default;  // OK

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string_view component, std::string_view msg) {
    return Status(Code::kInvalidArgument, component, msg);
  }
  static Status NotFound(std::string_view component, std::string_view msg) {
    return Status(Code::kNotFound, component, msg);
  }
  static Status Corruption(std::string_view component, std::string_view msg) {
    return Status(Code::kCorruption, component, msg);
  }
  static Status IOError(std::string_view component, std::string_view msg) {
    return Status(Code::kIOError, component, msg);
  }
  static Status Timeout(std::string_view component, std::string_view msg) {
    return Status(Code::kTimeout, component, msg);
  }
  static Status Unavailable(std::string_view component, std::string_view msg) {
    return Status(Code::kUnavailable, component, msg);
  }
  static Status Aborted(std::string_view component, std::string_view msg) {
    return Status(Code::kAborted, component, msg);
  }
  static Status Internal(std::string_view component, std::string_view msg) {
    return Status(Code::kInternal, component, msg);
  }

  bool ok() const { return rep_ == nullptr; }
  Code code() const { return rep_ ? rep_->code : Code::kOk; }
  // Empty for OK.
  const std::string& component() const;
  const std::string& message() const;
  // "rank 3 on n2, job 17": where the failure was made; empty for OK.
  const std::string& where() const;

  // "baton[ckpt] InvalidArgument (rank 3 on n2, job 17): <message>", or "OK".
  std::string ToString() const;

  // Adds context in front of the message, keeping code and origin:
  // s.Annotate("restoring step 40") -> "restoring step 40: <message>".
  Status Annotate(std::string_view context) const;

  // Status is [[nodiscard]]: a failure dropped by accident does not compile.
  // Where dropping it is the point (a best-effort cleanup whose failure
  // changes nothing, a destructor), say so: s.IgnoreError().
  void IgnoreError() const {}

 private:
  Status(Code code, std::string_view component, std::string_view msg);

  struct Rep {
    Code code;
    std::string component;
    std::string message;
    std::string where;
  };
  // Shared and immutable: copying a Status is a pointer copy.
  std::shared_ptr<const Rep> rep_;
};

std::ostream& operator<<(std::ostream& os, const Status& s);

}  // namespace baton

// Returns early from the enclosing function when `expr` gives a failed Status.
#define BATON_RETURN_IF_ERROR(expr)              \
  do {                                           \
    ::baton::Status baton_status_ = (expr);      \
    if (!baton_status_.ok()) return baton_status_; \
  } while (0)
