// Finding and opening libcudart and libnccl at run time (dlopen), so that
// libbaton.so names neither as NEEDED and loads on nodes without CUDA
// (login nodes, CPU partitions); only a program that asks for the nccl
// backend needs them.
//
// Where each library is looked for, in order:
//   1. the directories of $BATON_NCCL_LIBRARY_PATH (colon-separated),
//   2. the directory named at configure time (--with-nccl-runtime=DIR),
//   3. the dynamic linker's own search by soname (LD_LIBRARY_PATH,
//      ld.so.cache, the default folders),
//   4. the folders configure found CUDA and NCCL in.
// A directory of 1. or 2. may also be a Python environment's site-packages
// (or its nvidia/ folder): the layout of NVIDIA's wheels
// (nvidia/nccl/lib/libnccl.so.2, nvidia/cuda_runtime/lib/libcudart.so.12,
// nvidia/cu13/lib/libcudart.so.13) is searched below it.
//
// This header and nccl_library.cc need no MPI (tests/gpu builds them alone).
#pragma once

#include <string>
#include <vector>

#include "baton/status.h"

namespace baton::nccl {

inline constexpr const char* kLibraryPathEnv = "BATON_NCCL_LIBRARY_PATH";

// One library to find: what it is for messages ("NCCL"), its file names
// best first ("libnccl.so.2", "libnccl.so"), and the folders under a named
// directory where NVIDIA's wheels put it ("nvidia/nccl/lib").
struct LibrarySpec {
  const char* what;
  std::vector<std::string> names;
  std::vector<std::string> wheel_dirs;
};

// Where to look (see the top of this file): `named` are searched with the
// wheel layout, then the soname alone, then `found`.
struct LibrarySearch {
  std::vector<std::string> named;
  std::vector<std::string> found;
};

// The search of this build: $BATON_NCCL_LIBRARY_PATH, then configure's.
LibrarySearch DefaultLibrarySearch();

// The paths tried for `spec`, in order (a bare name means the dynamic
// linker's own search).
std::vector<std::string> LibraryCandidates(const LibrarySpec& spec, const LibrarySearch& search);

// dlopen()s the first candidate that loads (RTLD_NOW | RTLD_LOCAL) into
// *handle and its path into *path. Unavailable otherwise, naming the
// library, every path tried with the loader's reason, and how to name a
// directory.
Status OpenLibrary(const LibrarySpec& spec, const LibrarySearch& search, void** handle, std::string* path);

// dlsym(handle, name) into *fn; Unavailable naming the symbol and the
// library's path when it is missing (a library too old).
Status ResolveSymbol(void* handle, const std::string& path, const char* name, void** fn);

}  // namespace baton::nccl
