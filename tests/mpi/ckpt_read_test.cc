// What a restore reads: the all-gather of a replicated array's parts at any
// size (ckpt/replicated_gather.h) and the bytes each rank reads from the
// shard files (CheckpointStats::bytes_read).
#include <mpi.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "ckpt/layout.h"
#include "ckpt/replicated_gather.h"
#include "tests/mpi/ckpt_fixture.h"

namespace baton::ckpt_testing {
namespace {

// Every rank holds only its part; after the gather every rank holds every
// row, through one all-gather (the array fits one message) or through
// per-part broadcasts in messages of max_message bytes (an array past
// MPI's int count: there max_message is INT_MAX; smaller here so that
// parts are cut into several messages, a message ends inside a row, and
// a rank's part is not a whole number of messages).
TEST(ReplicatedGather, EveryRankGetsEveryRowAtAnyMessageSize) {
  const uint64_t rows = 37, row_bytes = 12;
  for (uint64_t max_message : {uint64_t{1}, uint64_t{5}, uint64_t{100}, rows * row_bytes - 1, rows * row_bytes,
                               ckpt::kMaxGatherMessage}) {
    std::vector<char> data(rows * row_bytes, 0);
    uint64_t first = 0, n = 0;
    ckpt::ReplicatedRows(rows, Size(), Rank(), &first, &n);
    for (uint64_t i = first * row_bytes; i < (first + n) * row_bytes; ++i) data[i] = static_cast<char>(i * 7 + 3);
    Status s = ckpt::GatherReplicatedRows(MPI_COMM_WORLD, data.data(), rows, row_bytes, max_message);
    EXPECT_TRUE(s.ok()) << s;
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < data.size(); ++i) wrong += data[i] != static_cast<char>(i * 7 + 3);
    EXPECT_EQ(wrong, 0u) << "max_message " << max_message;
  }
}

}  // namespace
}  // namespace baton::ckpt_testing
