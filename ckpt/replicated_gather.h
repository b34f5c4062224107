// A restore's all-gather of a replicated array: each rank reads only its
// part (ReplicatedPart, the rows it wrote at the same world size) and the
// ranks exchange the parts, so a replicated array costs every rank
// 1/world of its bytes from the file system, whatever its size.
//
// MPI counts and displacements are int: an array of more than INT_MAX
// bytes cannot go through one MPI_Allgatherv of bytes. Such an array goes
// part by part, each part broadcast from its rank in messages of at most
// max_message bytes (the same bytes on the wire as the all-gather; more
// messages). Before, such an array was read whole by every rank, which at
// level 2 needed every other node's shard and always failed over.
#pragma once

#include <mpi.h>

#include <climits>
#include <cstdint>
#include <string_view>

#include "baton/status.h"

namespace baton::ckpt {

// The largest MPI message of a gather: MPI's int count.
constexpr uint64_t kMaxGatherMessage = static_cast<uint64_t>(INT_MAX);

// data holds array `name`'s `rows` rows of row_bytes bytes; on entry this
// rank holds its part (ReplicatedPart(name, rows, row_bytes, size, rank)),
// on return every rank holds every row (an array ReplicatedPart keeps
// whole: broadcast from its owner). Collective over comm; every rank passes
// the same name, rows, row_bytes and max_message (>= 1).
Status GatherReplicatedRows(MPI_Comm comm, std::string_view name, char* data, uint64_t rows, uint64_t row_bytes,
                            uint64_t max_message = kMaxGatherMessage);

}  // namespace baton::ckpt
