// A write fault underneath HDF5 and MPI-IO, for one rank of a test
// (tests/mpi/write_fault.cc): HDF5's own data writes bypass baton's file
// layer (ckpt/fs), so the test binary defines pwrite, pwritev and their
// 64-bit names, and write (a shard member's rows with independent
// transfers: PosixEnv's WritableFile, beneath FaultEnv too) itself (exported with -export-dynamic, so that Open MPI's
// fbtl component, loaded later, binds to them) and fails the writes whose
// descriptor's path contains a given part, a given number of times, after
// which they go through to the C library again.
#pragma once

#include <string>

namespace baton::ckpt_testing {

// Which writes a fault hits: write(2) is a shard member's rows
// (independent transfers); the pwrite family is HDF5's, through MPI-IO
// (collective rows, and the metadata at the close).
enum class WriteCalls { kAny, kPlainOnly, kPositionedOnly };

// Fails the next `count` writes of this process to a file whose path
// contains `path_part` with `err` (ENOSPC, EIO), or all of them until
// DisarmWriteFault when count < 0.
void ArmWriteFault(const std::string& path_part, int err, int count = -1, WriteCalls calls = WriteCalls::kAny);
void DisarmWriteFault();
// Writes failed since the last Arm.
int FailedWrites();

}  // namespace baton::ckpt_testing
