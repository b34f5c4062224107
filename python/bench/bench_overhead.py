#!/usr/bin/env python3
"""What the Python binding adds to a checkpoint: registration plus save of the
same bytes from Python (baton.ArrayCheckpointer) and from C++ (the same calls
made and timed in C++ by baton._baton._CppBench, no Python between them),
side by side in one run, and the time save_async blocks the caller in each.

    mpirun -n 3 python3 python/bench/bench_overhead.py --dir /tmp/bench --bytes 384M

Every rank holds --bytes / ranks bytes in --arrays sharded f32 arrays (the
same NumPy arrays for both sides). Each repetition runs a Python and a C++
round of each kind, in an order that alternates between repetitions; each
round is timed as the slowest rank's time; the medians are compared. A
save_async round is followed by an untimed wait() (its commit), so that each
round blocks for its own staging copy and agreement only. The disk's speed
swings from minute to minute: only the ratios of medians measured in the
same run mean anything. The output ends with one JSON line.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

from baton import _baton


def size_arg(text):
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.upper().rstrip("IB")
    return int(float(t[:-1] if t[-1:] in units else t) * units[t[-1] if t[-1:] in units else ""])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", required=True, help="a directory for the two checkpoint directories (py/, cpp/)")
    p.add_argument("--bytes", type=size_arg, default=size_arg("256M"), help="bytes over all ranks (default 256M)")
    p.add_argument("--arrays", type=int, default=8, help="arrays per rank (default 8)")
    p.add_argument("--reps", type=int, default=5, help="repetitions (default 5)")
    a = p.parse_args()

    rt = _baton.Runtime()
    from mpi4py import MPI  # after baton: it adopts baton's MPI (the slowest rank's times)
    comm = MPI.COMM_WORLD
    cols = 1024
    rows = max(1, a.bytes // rt.size // a.arrays // 4 // cols)
    rng = np.random.default_rng(rt.rank)
    arrays = [rng.standard_normal((rows, cols), dtype=np.float32) for _ in range(a.arrays)]
    offset, global_shape = rt.rank * rows, (rows * rt.size, cols)
    py_dir, cpp_dir = os.path.join(a.dir, "py"), os.path.join(a.dir, "cpp")
    os.makedirs(a.dir, exist_ok=True)
    ck = _baton.ArrayCheckpointer(rt, dir=py_dir, level2=False, keep=2)
    cpp = _baton._CppBench(rt, cpp_dir, arrays, offset, rows * rt.size)

    def py_round(step, async_):
        t0 = time.perf_counter()
        for i, x in enumerate(arrays):
            ck.register_sharded("array%d" % i, x, offset, global_shape)
        t_reg = time.perf_counter() - t0
        if async_:
            ck.save_async(step)
        else:
            ck.save(step)
        return time.perf_counter() - t0, t_reg

    def cpp_round(step, async_):
        return cpp.register_and_save(step, async_)

    results = {k: [] for k in ("py_save", "cpp_save", "py_async", "cpp_async", "py_register", "cpp_register")}
    step = 0
    for rep in range(a.reps):
        sides = [("py", py_round), ("cpp", cpp_round)]
        if rep % 2:
            sides.reverse()
        for kind in ("save", "async"):
            for side, fn in sides:
                step += 1
                comm.Barrier()
                s, reg = fn(step, kind == "async")
                results["%s_%s" % (side, kind)].append(comm.allreduce(s, op=MPI.MAX))
                results["%s_register" % side].append(comm.allreduce(reg, op=MPI.MAX))
                if kind == "async":
                    (ck.wait if side == "py" else cpp.wait)()
    ck.close()
    cpp.close()
    if rt.rank == 0:
        med = {k: statistics.median(v) for k, v in results.items()}
        total = rows * cols * 4 * a.arrays * rt.size
        print("# %d ranks, %d arrays per rank, %.1f MiB in all, %d repetitions, load %s" %
              (rt.size, a.arrays, total / 2**20, a.reps, " ".join("%.2f" % x for x in os.getloadavg())))
        print("# %-22s %10s %10s %8s" % ("median s (slowest rank)", "python", "c++", "py/c++"))
        for kind, label in (("register", "%d registrations" % a.arrays), ("save", "register + save"),
                            ("async", "register + save_async")):
            py, c = med["py_" + kind], med["cpp_" + kind]
            print("  %-22s %10.6f %10.6f %8.3f" % (label, py, c, py / c))
        print(json.dumps({"bench": "python_overhead", "ranks": rt.size, "bytes": total, "arrays": a.arrays,
                          "reps": a.reps, "load": os.getloadavg(), "seconds": results,
                          "median": med, "ratio_save": med["py_save"] / med["cpp_save"],
                          "ratio_async": med["py_async"] / med["cpp_async"],
                          "register_overhead_s": med["py_register"] - med["cpp_register"]}))
    rt.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
