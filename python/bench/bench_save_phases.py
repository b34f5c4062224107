#!/opt/baton-venv/bin/python
"""The C++ phases of baton.Checkpointer.save (last_stats()["phases"]) on one of bench_vs_dcp's states.

    tests/lib/mpirun-ranks 2 /opt/baton-venv/bin/python python/bench/bench_save_phases.py \\
        --kind tiny --mib 1 --dir /tmp/bench-phases [--group-size 1]

Saves --saves times (the first is not counted: the files' first creation) and prints rank 0's
median of each phase (hash, agree, create, write, close, verify, sync, meta_hash, manifest,
retention), seconds. --group-size: ranks per shard file (0, the default: a node's ranks share
one; 1: a shard per rank, as a shard per node is across nodes).
"""
import argparse
import os
import shutil
import statistics

from mpi4py import MPI  # initialises MPI; baton.Runtime adopts it

import baton
from bench_vs_dcp import make_state


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", required=True, help="a directory of the bench's own (emptied first)")
    parser.add_argument("--kind", choices=("ddp", "fsdp2", "tiny"), default="tiny")
    parser.add_argument("--mib", type=int, default=1)
    parser.add_argument("--saves", type=int, default=6)
    parser.add_argument("--group-size", type=int, default=0)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rt = baton.Runtime()
    baton.init_process_group(rt, backend="gloo")
    if comm.rank == 0:
        shutil.rmtree(args.dir, ignore_errors=True)
    comm.Barrier()
    model, optim = make_state(args.mib, args.kind)
    ck = baton.Checkpointer(rt, dir=args.dir, level2=False, keep=2, group_size=args.group_size)
    phases = []
    for step in range(args.saves):
        ck.save({"model": model, "optim": optim}, step)
        phases.append(ck.last_stats()["phases"])
    ck.close()
    if comm.rank == 0:
        counted = phases[1:] or phases
        print(f"# bench_save_phases: {comm.size} ranks, {args.kind} {args.mib} MiB, group_size {args.group_size}, "
              f"{len(counted)} saves, load {os.getloadavg()[0]:.2f}")
        print(" ".join(f"{k} {statistics.median(p[k] for p in counted):.4f}" for k in counted[0]))


if __name__ == "__main__":
    main()
