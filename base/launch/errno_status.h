// The one Status for a failed system call on a path, for the launch
// library's file-system code (hostfile, node-local directory).
#pragma once

#include <cstring>
#include <string>

#include "base/launch/component.h"
#include "base/launch/quote.h"
#include "baton/status.h"

namespace baton::launch {

// "<what> '<path>': <strerror(err)>", an IOError.
inline Status Errno(const std::string& what, const std::string& path, int err) {
  return Status::IOError(kComponent, what + " " + Quoted(path) + ": " + std::strerror(err));
}

}  // namespace baton::launch
