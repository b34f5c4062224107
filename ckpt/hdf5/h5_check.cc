#include "ckpt/hdf5/h5_check.h"

#include <string>

#include "baton/log.h"

namespace baton::ckpt::h5 {
namespace {

herr_t CollectMessage(unsigned n, const H5E_error2_t* err, void* client) {
  auto* out = static_cast<std::string*>(client);
  if (n > 0) *out += "; ";
  *out += err->func_name ? err->func_name : "?";
  *out += ": ";
  *out += err->desc ? err->desc : "?";
  return 0;
}

// file:line of the failed call as the source tree names it ("ckpt/hdf5/
// shard_reader.cc"): __FILE__ is the path the compiler was given, which
// names the build's directories ("../ckpt/...", "/build/baton-1.0/ckpt/...")
// on every user's screen.
std::string SourceName(const char* file) {
  const std::string f(file ? file : "?");
  for (size_t at = f.rfind("ckpt/"); at != std::string::npos; at = at == 0 ? std::string::npos : f.rfind("ckpt/", at - 1)) {
    if (at == 0 || f[at - 1] == '/') return f.substr(at);
  }
  const size_t slash = f.rfind('/');
  return slash == std::string::npos ? f : f.substr(slash + 1);
}

}  // namespace

void QuietHdf5Errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

Status CheckH5(int64_t rc, const char* call, const char* file, int line) {
  if (rc >= 0) return Status::OK();
  std::string stack;
  // Outermost (the API call) first, the root cause last.
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, CollectMessage, &stack);
  H5Eclear2(H5E_DEFAULT);
  std::string call_name(call);
  if (auto paren = call_name.find('('); paren != std::string::npos) call_name.resize(paren);
  std::string msg = call_name + " failed at " + SourceName(file) + ":" + std::to_string(line);
  if (!stack.empty()) msg += " (HDF5: " + stack + ")";
  return Status::IOError(log::kCkpt, msg);
}

}  // namespace baton::ckpt::h5
