#include "mpi_runtime/mpi_check.h"

#include <atomic>
#include <mutex>
#include <string>

#include "baton/log.h"

namespace baton::mpi {
namespace {

std::atomic<bool> g_failed{false};
std::mutex g_first_mu;
std::string g_first;  // the first failure's message, for FailedStatus

// The call's name up to its argument list: "MPI_Allreduce", not the whole expression.
std::string CallName(const char* call) {
  std::string name(call);
  if (auto paren = name.find('('); paren != std::string::npos) name.resize(paren);
  return name;
}

// Error classes that say the caller passed something wrong: MPI itself is
// still sound, the call can be fixed and made again.
bool IsMisuse(int error_class) {
  switch (error_class) {
    case MPI_ERR_ARG:
    case MPI_ERR_COUNT:
    case MPI_ERR_TYPE:
    case MPI_ERR_BUFFER:
    case MPI_ERR_TAG:
    case MPI_ERR_RANK:
    case MPI_ERR_ROOT:
    case MPI_ERR_OP:
    case MPI_ERR_COMM:
    case MPI_ERR_REQUEST:
    case MPI_ERR_TRUNCATE:
      return true;
    default:
      return false;
  }
}

}  // namespace

void MarkFailed() { g_failed.store(true, std::memory_order_release); }
bool Failed() { return g_failed.load(std::memory_order_acquire); }

Status CheckMpi(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return Status::OK();
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  int error_class = MPI_ERR_OTHER;
  if (MPI_Error_class(rc, &error_class) != MPI_SUCCESS) error_class = MPI_ERR_OTHER;
  std::string message = CallName(call) + " failed with error " + std::to_string(rc) + " (" +
                        std::string(text, static_cast<size_t>(len)) + ") at " + file + ":" + std::to_string(line);
  if (!IsMisuse(error_class)) {
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(g_first_mu);
      if (g_first.empty()) {
        g_first = message;
        first = true;
      }
    }
    MarkFailed();
    if (first) {
      BATON_LOG(kRuntime, error) << message << "; MPI is not called again by this process (no heartbeats, "
                                 << "no MPI_Finalize)";
    }
  }
  return Status::IOError(log::kRuntime, message);
}

Status FailedStatus(const char* call, const char* file, int line) {
  std::string first;
  {
    std::lock_guard<std::mutex> lock(g_first_mu);
    first = g_first;
  }
  return Status::IOError(log::kRuntime, CallName(call) + " not made at " + file + ":" + std::to_string(line) +
                                            ": MPI failed earlier in this process (" + first + ")");
}

}  // namespace baton::mpi
