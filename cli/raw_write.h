// The plain durable write a checkpoint benchmark measures baton against
// (`baton bench ckpt`, `--async`): what `torch.save` of a rank's part
// followed by an fsync does, or `dd conv=fsync`: the disk's own figure in
// the same run.
#pragma once

#include <string>
#include <vector>

namespace baton::cli {

// "WHAT PATH: errno's text".
std::string Errno(const std::string& what, const std::string& path);

// A new file `path`.tmp, the arrays written in 8 MiB pieces, fsynced,
// renamed over `path`, its directory `dir` fsynced. "" on success, else the
// failed step, the path and errno's text.
std::string RawWrite(const std::string& dir, const std::string& path, const std::vector<std::vector<float>>& arrays);

}  // namespace baton::cli
