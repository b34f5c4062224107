// Reads one chunk of a committed shard and verifies it: the one
// chunk-verify loop of restore (ckpt/restore.cc, ckpt/level_choice.cc) and
// of `baton ckpt verify` (ckpt/verify.cc).
//
// A chunk's xxh3 covers the chunk's bytes whole (docs/checkpoint-format.md)
// and xxh3 cannot be resumed in the middle, so a chunk is always read whole
// and every byte given to a caller was hashed with its chunk before Read
// returns OK: "verified restore" holds for partly read chunks too. The
// chunk is read in pieces, each hashed on a second thread while the next is
// read (ckpt/overlapped_hash.h) and the kernel reads ahead the one after
// (ShardReader::Prefetch). Pieces whose rows are all kept go straight into
// the caller's buffer; the others go through two piece buffers in turn and
// the kept rows are copied out.
//
// Threading: one thread (HDF5 calls); not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "baton/status.h"
#include "ckpt/hdf5/shard_reader.h"
#include "ckpt/manifest.h"
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

  // Whether the last Read failed on the checksum (not on a read).
  bool mismatched() const { return mismatched_; }

  // Bytes read from shard files by this reader so far (whole chunks).
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  std::vector<char> pieces_[2];  // for pieces not wholly kept, two in turn
  uint64_t bytes_read_ = 0;
  bool mismatched_ = false;
};

}  // namespace baton::ckpt
