// The batch script's MASTER_PORT (issue 30 item 7): a port that no other
// job's allocation step on the same node holds at the same time.
//
// Slurm reserves ports for steps (MpiParams=ports, SLURM_STEP_RESV_PORTS),
// never for the batch script or salloc's interactive step, where
// "torchrun/deepspeed from the batch script" listens on MASTER_ADDR (the
// batch node). slurmstepd of that step claims one port of port_range on its
// node: one file per port in a root-owned directory, held with flock(2)
// for the step's life. The lock goes with the process that holds it (a
// killed slurmstepd frees its port at once, no stale entry), and two
// holders of one port cannot exist, so two jobs' batch scripts on one node
// never get the same MASTER_PORT.
#pragma once

#include <string>

#include "baton/status.h"

namespace baton::launch {

// Claims the first free port of [lo, hi] at or after `start` (wrapping), in
// `dir` (made 0755 when missing; refused when it is not a directory that
// only root can write). On success *port is the port and *fd the open,
// locked file (close-on-exec) that holds it until ReleasePort or the
// process's end. Every port held: Unavailable naming the range and dir.
Status ClaimPort(const std::string& dir, int lo, int hi, int start, int* port, int* fd);

// Gives the port back (closes the file; the file itself stays, empty).
void ReleasePort(int* fd);

}  // namespace baton::launch
