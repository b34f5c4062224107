"""What the plan's agreement costs a save: walk + agree against the whole Checkpointer.save.

    PYTHONPATH=_build/python tests/lib/mpirun-ranks 2 /opt/baton-venv/bin/python \
        python/bench/bench_plan_agreement.py --dir /tmp/bench-plan [--tensors 200] [--rounds 20]

A state of --tensors small float32 tensors (1 KiB each: the save's fixed
costs dominate, so the agreement's share is the largest it gets) plus an
optimizer-like nesting. Per round, in one run: the walk alone, the walk and
the agreement (the digest all-gather), and a whole save (which does both,
plus the registrations' agreement, the extension's save and commit), in
alternating order. The slowest rank's seconds (an MPI max after a barrier);
median and range over the rounds, and the agreement's share of the save.
"""

import argparse
import os
import shutil
import statistics
import time

import numpy as np

import baton
from baton import plan_agreement, state_walk


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", required=True)
    p.add_argument("--tensors", type=int, default=200)
    p.add_argument("--rounds", type=int, default=20)
    a = p.parse_args()
    rt = baton.Runtime()
    from mpi4py import MPI  # after baton: it adopts baton's MPI
    comm = MPI.COMM_WORLD
    if rt.rank == 0:
        shutil.rmtree(a.dir, ignore_errors=True)
        os.makedirs(a.dir)
    comm.Barrier()
    state = {"model": {f"layer{i}.weight": np.full(256, i, dtype=np.float32) for i in range(a.tensors)},
             "optim": {"state": {i: {"step": i, "lr": 0.1} for i in range(a.tensors)}}}
    ck = baton.Checkpointer(rt, dir=a.dir, level2=False, keep=2)

    def timed(fn):
        comm.Barrier()
        t0 = time.perf_counter()
        fn()
        return comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)

    def walk():
        state_walk.walk(state)

    def walk_agree():
        local = state_walk.walk(state)
        plan_agreement.agree(rt, local.agreed(["bench"]), "bench")

    step = [0]

    def save():
        step[0] += 1
        ck.save(state, step[0])

    save()  # registrations made once, as in a training loop
    res = {"walk": [], "walk+agree": [], "save": []}
    sides = [("walk", walk), ("walk+agree", walk_agree), ("save", save)]
    for r in range(a.rounds):
        for name, fn in (sides if r % 2 == 0 else sides[::-1]):
            res[name].append(timed(fn))
    ck.close()
    if rt.rank == 0:
        print(f"ranks {rt.size}, {a.tensors} tensors of 1 KiB, {a.rounds} rounds; "
              f"load {' '.join(open('/proc/loadavg').read().split()[:3])}")
        for name, xs in res.items():
            print(f"{name:11s} median {statistics.median(xs) * 1e3:8.3f} ms  "
                  f"range {min(xs) * 1e3:.3f}-{max(xs) * 1e3:.3f} ms")
        agree = statistics.median(res["walk+agree"]) - statistics.median(res["walk"])
        print(f"the agreement (median walk+agree - median walk): {agree * 1e3:.3f} ms, "
              f"{100 * agree / statistics.median(res['save']):.1f}% of the median save")


if __name__ == "__main__":
    main()
