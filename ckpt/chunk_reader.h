// Reads chunks of committed shards and verifies them: the one chunk-verify
// loop of restore (ckpt/restore.cc, ckpt/level_choice.cc) and of `baton
// ckpt verify` (ckpt/verify.cc).
//
// A chunk's xxh3 covers the chunk's bytes whole (docs/checkpoint-format.md)
// and xxh3 cannot be resumed in the middle, so a chunk is always read whole
// and every byte given to a caller was hashed with its chunk before Read
// (or Finish, after Queue) returns OK: "verified restore" holds for partly
// read chunks too. Saves cut a rank's rows into chunks of at most
// kChunkBytes (ckpt/chunk_digests.h), so a partly read chunk costs at most
// that much beyond the rows kept. A chunk is read in pieces, each hashed on
// a second thread while the next is read (ckpt/overlapped_hash.h), across
// chunks too (Queue: the last piece of one chunk is hashed while the next
// chunk's first is read), and the kernel reads ahead the one after
// (ShardReader::Prefetch). Pieces whose rows are all kept go straight into
// the caller's buffer; the others go through two piece buffers in turn and
// the kept rows are copied out.
//
// Threading: one thread (HDF5 calls); not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "baton/status.h"
#include "ckpt/hdf5/shard_reader.h"
#include "ckpt/manifest.h"
#include "ckpt/overlapped_hash.h"
#include "ckpt/phase_clock.h"

namespace baton::ckpt {

class ChunkReader {
 public:
  // Bytes read (and hashed) at a time: small enough to stay in the CPU's
  // cache between the read and the hash, and to bound the buffers for rows
  // that are not kept.
  static constexpr uint64_t kPieceBytes = 8u << 20;

  // Called after each piece with the bytes of the piece (verify's progress).
  using Progress = std::function<void(uint64_t bytes)>;

  // Reads chunk c of dataset d (array a) through reader and checks its
  // xxh3. The global rows [keep_first, keep_first + keep_rows) clipped to
  // the chunk are written to dst, which holds global row keep_first (dst may
  // be null when keep_rows is 0: verify only). A digest that differs:
  // kCorruption, "FILE: dataset NAME rows A-B (written by rank R): xxh3 X
  // != manifest Y", FILE being `file` (how the caller names the shard); a
  // failed read: its status (which names the file).
  // When Read fails, dst may hold some of the chunk's unverified rows: the
  // caller must not use them.
  Status Read(h5::ShardReader* reader, const std::string& file, const ArrayMeta& a, const DatasetMeta& d, const Chunk& c, uint64_t keep_first,
              uint64_t keep_rows, char* dst, PhaseClock* clock, const Progress& progress = nullptr);
  // Read without waiting for the chunk's hash: the checks of queued chunks
  // are done as their hashes end (a later Queue may return the corruption
  // of an earlier chunk) and by Finish, which the caller must call, and see
  // OK, before it uses any row queued. `a`, `d` and `c` must outlive the
  // Finish (their names go into the message of a mismatch).
  Status Queue(h5::ShardReader* reader, const std::string& file, const ArrayMeta& a, const DatasetMeta& d,
               const Chunk& c, uint64_t keep_first, uint64_t keep_rows, char* dst, PhaseClock* clock,
               const Progress& progress = nullptr);
  // Waits for every queued chunk's hash and checks the rest.
  Status Finish(PhaseClock* clock);

  // Whether the last Read failed on the checksum (not on a read).
  bool mismatched() const { return mismatched_; }

  // Bytes read from shard files by this reader so far (whole chunks).
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  // A chunk whose every piece was submitted, its digest not yet compared.
  struct Check {
    std::string file;
    const ArrayMeta* array;
    const Chunk* chunk;
  };
  // Compares the digests the hash has ended with the oldest checks.
  Status CheckEnded();

  std::vector<char> pieces_[2];  // for pieces not wholly kept, two in turn
  uint64_t tickets_[2] = {0, 0}; // the last piece hashed from each (OverlappedHash::WaitFor)
  uint64_t piece_ = 0;           // pieces through the buffers: which is next
  std::deque<Check> checks_;
  uint64_t bytes_read_ = 0;
  bool mismatched_ = false;
  OverlappedHash sum_;  // declared after pieces_: its piece in flight is waited for before they go
};

}  // namespace baton::ckpt
