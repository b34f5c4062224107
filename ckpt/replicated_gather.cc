#include "ckpt/replicated_gather.h"

#include <algorithm>
#include <vector>

#include "ckpt/layout.h"
#include "mpi_runtime/mpi_check.h"

namespace baton::ckpt {

Status GatherReplicatedRows(MPI_Comm comm, std::string_view name, char* data, uint64_t rows, uint64_t row_bytes,
                            uint64_t max_message) {
  int rank = 0, size = 1;
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_rank(comm, &rank)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_size(comm, &size)));
  if (size == 1 || rows == 0 || row_bytes == 0) return Status::OK();
  max_message = std::clamp<uint64_t>(max_message, 1, kMaxGatherMessage);
  const uint64_t total = rows * row_bytes;  // the manifest's parser checked: no overflow
  if (total <= max_message) {
    // Every count and displacement fits: one all-gather.
    std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
    for (int k = 0; k < size; ++k) {
      uint64_t first = 0, n = 0;
      ReplicatedPart(name, rows, row_bytes, size, k, &first, &n);
      counts[static_cast<size_t>(k)] = static_cast<int>(n * row_bytes);
      displs[static_cast<size_t>(k)] = static_cast<int>(first * row_bytes);
    }
    return BATON_MPI_CHECK(
        MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts.data(), displs.data(), MPI_BYTE, comm));
  }
  for (int k = 0; k < size; ++k) {
    uint64_t first = 0, n = 0;
    ReplicatedPart(name, rows, row_bytes, size, k, &first, &n);
    char* part = data + first * row_bytes;
    const uint64_t bytes = n * row_bytes;
    for (uint64_t at = 0; at < bytes; at += max_message) {
      const int count = static_cast<int>(std::min(max_message, bytes - at));
      BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Bcast(part + at, count, MPI_BYTE, k, comm)));
    }
  }
  return Status::OK();
}

}  // namespace baton::ckpt
