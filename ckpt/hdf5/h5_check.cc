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
  std::string msg = call_name + " failed at " + file + ":" + std::to_string(line);
  if (!stack.empty()) msg += " (HDF5: " + stack + ")";
  return Status::IOError(log::kCkpt, msg);
}

}  // namespace baton::ckpt::h5
