// How the launch commands (baton env, hostfile, nodes) show a Status: the
// command names itself ("baton env: "), so the text is the code, where and
// message, without the label of the library that made it ("baton[spank]",
// the plugin's, which shares the launch derivation).
#pragma once

#include <string>

#include "baton/status.h"

namespace baton::cli {

// "NotFound (host n1): SLURM_JOB_ID is not set ...".
inline std::string ErrorText(const Status& s) {
  std::string out(CodeName(s.code()));
  if (!s.where().empty()) out += " (" + s.where() + ")";
  return out + ": " + s.message();
}

}  // namespace baton::cli
