// The partner exchange of level 2 (ckpt/README.md, "Levels 2 and 3"):
// which rank keeps a copy of whose shard, and moving whole files between
// ranks over MPI.
//
// The ring: the partner of node i is node (i + 1) mod nodes. Rank r, the
// l-th rank of its node, sends its shard to the (l mod n)-th rank of the
// partner node (n: that node's ranks), so on uneven nodes a rank of a
// smaller partner node receives several shards, and every shard still has
// its copy on another node. One node: no partner (-1).
//
// ExchangeFiles runs on the caller's thread only (the background writer
// makes no MPI call). Each file goes in pieces of at most 64 MiB: the
// sender reads a piece (Env::ReadAt), hashes it and sends it; the receiver
// writes it (fs::DurableFile: a temporary of its own), and after the last
// piece checks the xxh3 of what it received against the sender's, then
// fsyncs, drops it from the page cache and renames it into place: a file
// in place is a verified copy.
#pragma once

#include <mpi.h>
#include <sys/types.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "baton/status.h"
#include "ckpt/fs/env.h"

namespace baton::ckpt {

// The rank that keeps rank r's copy, for every r; -1 when there is one node.
std::vector<int> PartnerRanks(const std::vector<int>& node_of);

// One file to move: `from` reads `from_path`, `to` writes `to_path`.
struct FileMove {
  int from = 0;
  int to = 0;
  std::string from_path;
  std::string to_path;
};

// Collective over comm (every rank passes the same list): this rank sends
// the files it is `from` of and receives those it is `to` of. Local:
// OK or the first failure of this rank (the caller agrees on it); a
// sender's failure to read is sent on to its receiver as a failed file.
// *received: the bytes this rank received and kept (verified).
//
// deadline (steady_clock seconds since its epoch, as ckpt's Now(); every
// rank passes a finite one or none): a bound for WaitOrAbandon. The ranks
// agree before each round of pieces whether any is past it, and then all
// stop there (no message left in flight); a receiver past it writes no
// further piece. Either way: Aborted, no file or temporary left. So the
// exchange ends within the deadline plus one piece's round.
Status ExchangeFiles(MPI_Comm comm, fs::Env* env, const std::vector<FileMove>& moves, mode_t file_mode,
                     uint64_t* received, double deadline = std::numeric_limits<double>::infinity());

}  // namespace baton::ckpt
