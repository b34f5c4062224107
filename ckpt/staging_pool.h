// The staging copy of an asynchronous save: one copy of this rank's state
// (its sharded rows, its whole replicated arrays, its rank state, the user
// blob), taken by SaveAsync on the caller's thread and read afterwards by
// the background writer and by Rollback (level 1, memory_level.h).
//
// One copy in all: buffers are kept and reused by the next save (grown
// when the registrations grew), so a steady training loop allocates (and
// page-faults) its staging memory once. Memory: the bytes of this rank's
// registered arrays plus its blobs.
//
// Threading: Stage writes the buffers and must not run while a writer or a
// Rollback reads them (the Checkpointer completes the save in flight first);
// reading from several threads at once is fine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/checksum.h"
#include "ckpt/chunk_digests.h"
#include "ckpt/registered.h"

namespace baton::ckpt {

// Copies n bytes from src to dst and hashes them in the same pass, block by
// block while each block is in the cache (the hash reads it, the copy then
// streams it out: memory traffic as a memcpy's): `whole` (may be null) gets
// every byte, `slice` (may be null) the bytes of [slice_begin, slice_end).
// src must not change during the call.
void CopyAndHash(char* dst, const char* src, uint64_t n, uint64_t slice_begin, uint64_t slice_end,
                 ChunkHasher* slice, Xxh3Stream* whole);

// One array as staged.
struct StagedArray {
  ArrayMeta meta;
  uint64_t first_row = 0;    // the staged rows (global): sharded: this rank's; replicated: all
  uint64_t rows = 0;
  uint64_t write_first = 0;  // the rows this rank writes (global), within the staged ones
  uint64_t write_rows = 0;
  std::vector<uint64_t> write_xxh3;  // of each chunk of the written rows (ckpt/chunk_digests.h)
  uint64_t whole_xxh3 = 0;   // replicated, when asked: of the whole copy
  const char* data = nullptr;  // the staged rows; owned by the pool
  const char* write_data() const { return data + (write_first - first_row) * meta.row_bytes(); }
};

struct StagedVersion {
  int64_t step = -1;
  std::vector<StagedArray> arrays;  // in the order of the registrations (by name)
  std::string blob;
  std::string rank_state;
  uint64_t bytes = 0;  // staged array bytes
  bool in_place = false;  // the rows are the registered arrays' memory (Stage's in_place)
};

class StagingPool {
 public:
  // Copies every registered array (in map order) and the blobs; replicated
  // arrays whole, hashing this rank's share of their rows (ReplicatedRows)
  // and, with hash_replicas, the whole copy too.
  // in_place: no copy: the staged rows are the registered arrays' own
  // memory (hashed in place), for a save the caller waits for (Save with
  // level 2): no staging memory at all, and no snapshot to roll back to.
  void Stage(int64_t step, const std::map<std::string, Registered>& arrays, int world, int rank,
             bool hash_replicas, const std::string& blob, const std::string& rank_state, bool in_place = false);
  const StagedVersion& version() const { return version_; }
  uint64_t capacity() const;

 private:
  char* Buffer(size_t slot, uint64_t bytes);

  std::vector<std::unique_ptr<char[]>> buffers_;
  std::vector<uint64_t> sizes_;
  StagedVersion version_;
};

}  // namespace baton::ckpt
