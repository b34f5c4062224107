// Reads chunks of committed shards and verifies them: the one chunk-verify
// loop of restore (ckpt/restore.cc, ckpt/level_choice.cc) and of `baton
// ckpt verify` (ckpt/verify.cc).
//
// A chunk's xxh3 covers the chunk's bytes whole (docs/checkpoint-format.md)
// and xxh3 cannot be resumed in the middle, so a chunk is always read whole
// and every byte given to a caller was hashed with its chunk before Read
// returns OK: "verified restore" holds for partly read chunks too. Saves
// cut a rank's rows into chunks of at most kChunkBytes (ckpt/chunk_digests.h),
// so a partly read chunk costs at most that much beyond the rows kept.
//
// A chunk is read through the shard's mapping where ShardReader has one
// (ShardReader::MapRows, asked for with BATON_CKPT_READ=mmap): its pieces of
// kPieceBytes are hashed in place in the page cache's pages, and the kept
// rows copied from them right after, while they are in the CPU's cache: one
// copy per byte, no buffer. Otherwise (the default, BATON_CKPT_READ=pread, or a file whose
// mapping failed) a chunk is read in pieces of kPieceBytes straight from
// the shard file (ShardReader::ReadRows: pread at the dataset's offset),
// and each piece is hashed on the reading thread right after its read,
// while it is still in the CPU's cache: the hash then costs a pass over
// the cache, not a second pass over memory. The disk does not wait for the
// hash: the kernel's read-ahead of the sequential stream (of the file, or
// of the mapping: MADV_SEQUENTIAL) keeps reads in flight meanwhile. Two
// designs measured slower (docs/benchmarks.md, 2026-12-04): a second thread
// hashing pieces of 8 MiB out of memory (it competed for the cores with the
// other ranks of an oversubscribed node), and posix_fadvise(WILLNEED) of the
// next chunk (each call cost more than the read-ahead it added). With
// pread, pieces whose rows are all kept go straight into the caller's
// buffer; the others go through one piece buffer and the kept rows are
// copied out.
//
// A reader made with copy_after_verify (RestoreOptions::verify_before_write)
// copies the kept rows out only once the chunk's digest matched: dst never
// receives a byte that failed, even when Read fails. Mapped, the chunk is
// hashed in place and its kept rows then copied from the mapping: what
// remains open is a write into the shard file by another program in the
// microseconds between a chunk's hash and its copy (the mapping shows the
// file as it is; a committed shard is never written in place), which the
// copy would carry unverified; with pread the chunk is read whole into a
// buffer of its own (at most kChunkBytes, reused from chunk to chunk, so no
// fresh page is touched) and the bytes copied are the bytes hashed.
//
// Threading: one thread (HDF5 calls); not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "baton/status.h"
#include "ckpt/checksum.h"
#include "ckpt/hdf5/shard_reader.h"
#include "ckpt/manifest.h"
#include "ckpt/phase_clock.h"

namespace baton::ckpt {

class ChunkReader {
 public:
  ChunkReader() = default;
  explicit ChunkReader(bool copy_after_verify) : copy_after_verify_(copy_after_verify) {}

  // Bytes read (and hashed) at a time: small enough to stay in a core's L2
  // cache (1 MiB on this project's AMD EPYC node, 512 KiB and more on
  // current x86 server cores) between the read and the hash, and to bound
  // the buffer for rows that are not kept.
  static constexpr uint64_t kPieceBytes = 512u << 10;

  // Called after each piece with the bytes of the piece (verify's progress).
  using Progress = std::function<void(uint64_t bytes)>;

  // Reads chunk c of dataset d (array a) through reader and checks its
  // xxh3. The global rows [keep_first, keep_first + keep_rows) clipped to
  // the chunk are written to dst, which holds global row keep_first (dst may
  // be null when keep_rows is 0: verify only). A digest that differs:
  // kCorruption, "FILE: dataset NAME rows A-B (written by rank R): xxh3 X
  // != manifest Y", FILE being `file` (how the caller names the shard); a
  // failed read: its status (which names the file).
  // When Read fails, dst may hold some of the chunk's unverified rows (not
  // with copy_after_verify: then dst is written only after the check): the
  // caller must not use them.
  Status Read(h5::ShardReader* reader, const std::string& file, const ArrayMeta& a, const DatasetMeta& d, const Chunk& c, uint64_t keep_first,
              uint64_t keep_rows, char* dst, PhaseClock* clock, const Progress& progress = nullptr);

  // Whether the last Read failed on the checksum (not on a read).
  bool mismatched() const { return mismatched_; }

  // Bytes read from shard files by this reader so far (whole chunks).
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  // A chunk in place in the reader's mapping (ShardReader::MapRows): hashed,
  // its kept rows copied to dst (with copy_after_verify once it matched).
  Status ReadMapped(const char* chunk, const std::string& file, const ArrayMeta& a, const Chunk& c, uint64_t keep_first,
                    uint64_t keep_rows, char* dst, PhaseClock* clock, const Progress& progress);
  // copy_after_verify: the chunk whole into piece_, checked, the kept rows copied to dst.
  Status ReadThenCopy(h5::ShardReader* reader, const std::string& file, const ArrayMeta& a, const DatasetMeta& d,
                      const Chunk& c, uint64_t keep_first, uint64_t keep_rows, char* dst, PhaseClock* clock);
  // The digest of the chunk just read against the manifest's (mismatched_ set when it differs).
  Status Check(const std::string& file, const ArrayMeta& a, const Chunk& c);

  std::vector<char> piece_;  // for pieces not wholly kept; copy_after_verify: the whole chunk
  bool copy_after_verify_ = false;
  Xxh3Stream sum_;           // the chunk being read; reset at each chunk's start
  uint64_t bytes_read_ = 0;
  bool mismatched_ = false;
};

}  // namespace baton::ckpt
