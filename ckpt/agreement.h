// Success agreed across ranks (SCR's scr_alltrue): after rank-local work
// (writing a shard, reading and verifying chunks) no rank goes on alone.
//
// Every rank of `comm` passes its own result; all get the same answer: OK
// when every rank succeeded, else the failure of the lowest failing rank
// (ranks whose failure is kAborted, "stopped because another rank failed",
// come after those with a failure of their own),
// with its code, its message prefixed by "rank R: " (R: the rank in
// MPI_COMM_WORLD) and "(and N more ranks failed)" when others failed too.
// The failing rank's message names the file it failed on, so every rank's
// Status says which rank and which file. The success path costs one
// MPI_Allreduce of an integer (and of the sums, AgreeAndSum).
//
// Collective over comm; MPI errors of the agreement itself are returned.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "baton/status.h"

namespace baton::ckpt {

struct Agreement {
  Status status;          // as described above
  int failed_ranks = 0;   // how many ranks failed
  int first_failed = -1;  // the lowest failing rank of comm, -1 if none
};

// prefer: failures of this code come first, whatever their rank (a
// restore prefers kCorruption: one rank's corrupt chunk decides the
// version's quarantine even when a lower rank had a transient error).
Status Agree(MPI_Comm comm, const Status& local, Agreement* out = nullptr, Code prefer = Code::kOk);

// Agree, and in the same round each of sums[0..n) replaced by its sum over
// the ranks (what a caller would otherwise sum in a round of its own: a
// restore's byte counts). The sums are valid when the result is OK.
Status AgreeAndSum(MPI_Comm comm, const Status& local, uint64_t* sums, int n, Code prefer = Code::kOk);

// A Status of `code` (not kOk) with component ckpt and `message`.
Status MakeStatus(Code code, std::string_view message);

// Root's outcome on every rank of comm in one MPI_Bcast (a second one only
// when its text passes 232 bytes), for a step that root alone performs
// (making a version directory, writing a shard's metadata): the other ranks
// did nothing that could fail, so this replaces Agree followed by a
// broadcast of root's result. Returns root's status, as Agree words it
// ("rank R: message", R root's rank in MPI_COMM_WORLD), on every rank; when
// it is OK, *payload is root's *payload (a version's name, the offsets HDF5
// allocated) on every rank. Collective over comm.
Status BcastOutcome(MPI_Comm comm, const Status& local, std::string* payload, int root = 0);

// Root's `s` on every rank of comm (its length first; up to INT_MAX bytes):
// the text of a decision one rank made (a manifest, a version's name).
Status BcastString(MPI_Comm comm, std::string* s, int root = 0);

}  // namespace baton::ckpt
