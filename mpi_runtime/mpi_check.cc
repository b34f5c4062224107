#include "mpi_runtime/mpi_check.h"

#include <string>

#include "baton/log.h"

namespace baton::mpi {

Status CheckMpi(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return Status::OK();
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  std::string what(text, static_cast<size_t>(len));
  std::string call_name(call);
  // The call's name up to its argument list: "MPI_Allreduce", not the whole expression.
  if (auto paren = call_name.find('('); paren != std::string::npos) call_name.resize(paren);
  return Status::IOError(log::kRuntime, call_name + " failed with error " + std::to_string(rc) +
                                            " (" + what + ") at " + file + ":" +
                                            std::to_string(line));
}

}  // namespace baton::mpi
