// The names of backends and algorithms, and their parsers: MPI-free, so
// that tests/gpu's benchmark (built without MPI) prints the same names.
#include <cstdlib>
#include <string>

#include "baton/communicator.h"

namespace baton {

std::string_view BackendName(Backend b) {
  switch (b) {
    case Backend::kMpi: return "mpi";
    case Backend::kNccl: return "nccl";
    case Backend::kAuto: return "auto";
  }
  return "?";
}

std::string_view AlgorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::kNative: return "native";
    case Algorithm::kHierarchical: return "hierarchical";
    case Algorithm::kRing: return "ring";
    case Algorithm::kAuto: return "auto";
  }
  return "?";
}

Status ParseBackend(std::string_view text, Backend* b) {
  for (Backend x : {Backend::kMpi, Backend::kNccl, Backend::kAuto})
    if (text == BackendName(x)) return *b = x, Status::OK();
  return Status::InvalidArgument("runtime", "backend '" + std::string(text) + "' is not one of mpi, nccl, auto");
}

Status ParseAlgorithm(std::string_view text, Algorithm* a) {
  for (Algorithm x : {Algorithm::kNative, Algorithm::kHierarchical, Algorithm::kRing, Algorithm::kAuto})
    if (text == AlgorithmName(x)) return *a = x, Status::OK();
  return Status::InvalidArgument("runtime", "algorithm '" + std::string(text) +
                                                "' is not one of native, hierarchical, ring, auto");
}

Status ResolveAlgorithm(std::optional<Algorithm> option, Algorithm* out) {
  if (option) return *out = *option, Status::OK();
  const char* v = std::getenv("BATON_ALGORITHM");
  if (v == nullptr || *v == '\0') return *out = Algorithm::kNative, Status::OK();
  if (ParseAlgorithm(v, out).ok()) return Status::OK();
  return Status::InvalidArgument("runtime", "BATON_ALGORITHM='" + std::string(v) +
                                                "' is not one of native, hierarchical, ring, auto");
}

}  // namespace baton
