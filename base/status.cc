#include "baton/status.h"

#include "baton/identity.h"

namespace baton {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "InvalidArgument";
    case Code::kNotFound: return "NotFound";
    case Code::kCorruption: return "Corruption";
    case Code::kIOError: return "IOError";
    case Code::kTimeout: return "Timeout";
    case Code::kUnavailable: return "Unavailable";
    case Code::kAborted: return "Aborted";
    case Code::kInternal: return "Internal";
  }
  return "Unknown";
}

Status::Status(Code code, std::string_view component, std::string_view msg)
    : rep_(std::make_shared<const Rep>(Rep{code, std::string(component), std::string(msg),
                                           CurrentIdentity().Describe()})) {}

static const std::string& Empty() {
  static const std::string empty;
  return empty;
}

const std::string& Status::component() const { return rep_ ? rep_->component : Empty(); }
const std::string& Status::message() const { return rep_ ? rep_->message : Empty(); }
const std::string& Status::where() const { return rep_ ? rep_->where : Empty(); }

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out = "baton[" + rep_->component + "] " + std::string(CodeName(rep_->code));
  if (!rep_->where.empty()) out += " (" + rep_->where + ")";
  out += ": " + rep_->message;
  return out;
}

Status Status::Annotate(std::string_view context) const {
  if (ok()) return *this;
  Status s;
  s.rep_ = std::make_shared<const Rep>(
      Rep{rep_->code, rep_->component, std::string(context) + ": " + rep_->message, rep_->where});
  return s;
}

std::ostream& operator<<(std::ostream& os, const Status& s) { return os << s.ToString(); }

}  // namespace baton
