#include "mpi_runtime/nccl/nccl_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

// The GPU bundle (tests/gpu/run-gpu-tests) builds this file without
// configure's header: it then searches only $BATON_NCCL_LIBRARY_PATH and
// the dynamic linker's folders.
#if __has_include("baton_config.h")
#include "baton_config.h"
#endif
#ifndef BATON_NCCL_RUNTIME_DIR
#define BATON_NCCL_RUNTIME_DIR ""
#endif
#ifndef BATON_NCCL_FOUND_DIRS
#define BATON_NCCL_FOUND_DIRS ""
#endif

namespace baton::nccl {
namespace {

constexpr const char* kComponent = "runtime";

std::vector<std::string> SplitPath(const std::string& list) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= list.size()) {
    size_t end = list.find(':', begin);
    if (end == std::string::npos) end = list.size();
    if (end > begin) out.push_back(list.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

void AddUnique(std::vector<std::string>* v, const std::string& s) {
  for (const auto& x : *v)
    if (x == s) return;
  v->push_back(s);
}

}  // namespace

LibrarySearch DefaultLibrarySearch() {
  LibrarySearch s;
  if (const char* env = std::getenv(kLibraryPathEnv))
    for (const auto& d : SplitPath(env)) AddUnique(&s.named, d);
  for (const auto& d : SplitPath(BATON_NCCL_RUNTIME_DIR)) AddUnique(&s.named, d);
  for (const auto& d : SplitPath(BATON_NCCL_FOUND_DIRS)) AddUnique(&s.found, d);
  return s;
}

std::vector<std::string> LibraryCandidates(const LibrarySpec& spec, const LibrarySearch& search) {
  std::vector<std::string> out;
  for (const auto& dir : search.named) {
    // The directory itself, then the wheels' folders below it, whether it
    // is site-packages (nvidia/nccl/lib) or its nvidia/ folder (nccl/lib).
    std::vector<std::string> dirs{dir};
    for (const auto& w : spec.wheel_dirs) {
      dirs.push_back(dir + "/" + w);
      if (w.rfind("nvidia/", 0) == 0) dirs.push_back(dir + "/" + w.substr(7));
    }
    for (const auto& d : dirs)
      for (const auto& n : spec.names) AddUnique(&out, d + "/" + n);
  }
  for (const auto& n : spec.names) AddUnique(&out, n);
  for (const auto& d : search.found)
    for (const auto& n : spec.names) AddUnique(&out, d + "/" + n);
  return out;
}

Status OpenLibrary(const LibrarySpec& spec, const LibrarySearch& search, void** handle, std::string* path) {
  *handle = nullptr;
  std::string tried;
  for (const auto& c : LibraryCandidates(spec, search)) {
    dlerror();
    if (void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *handle = h;
      *path = c;
      return Status::OK();
    }
    const char* why = dlerror();
    // A missing file is the common case: said once per path, briefly.
    std::string reason = why ? why : "not loadable";
    if (reason.find("No such file") != std::string::npos) reason = "not found";
    tried += (tried.empty() ? "" : "; ") + c + ": " + reason;
  }
  return Status::Unavailable(kComponent, std::string("backend nccl: cannot load ") + spec.what + " (" +
                                             spec.names.front() + "); tried " + tried +
                                             ". Install it, or name the directory that holds it (for "
                                             "NVIDIA's Python wheels: site-packages) in " +
                                             kLibraryPathEnv);
}

Status ResolveSymbol(void* handle, const std::string& path, const char* name, void** fn) {
  dlerror();
  *fn = dlsym(handle, name);
  if (*fn != nullptr) return Status::OK();
  const char* why = dlerror();
  return Status::Unavailable(kComponent, std::string("backend nccl: ") + path + " has no " + name + " (" +
                                             (why ? why : "null symbol") + "); it is older than this baton needs");
}

}  // namespace baton::nccl
