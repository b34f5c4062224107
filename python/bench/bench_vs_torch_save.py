#!/opt/baton-venv/bin/python
"""baton.Checkpointer against torch.save / torch.load for a DDP model's state.

Run under mpirun, one process per rank, on one node:

    tests/lib/mpirun-ranks 3 /opt/baton-venv/bin/python python/bench/bench_vs_torch_save.py --dir /tmp/bench
    tests/lib/mpirun-ranks 8 /opt/baton-venv/bin/python python/bench/bench_vs_torch_save.py --dir /tmp/bench

Every rank builds the same model (a stack of Linear layers of --mib MiB of
float32 parameters) and takes one Adam step on the same data, so that every
rank holds the same state, as under DDP: parameters plus Adam's exp_avg and
exp_avg_sq (3 x --mib MiB). Each round measures, side by side in one run,
alternating which goes first:

  baton save        ck.save(state, step) on every rank: the replicated arrays
                    are written once in total, each rank writing ~1/N of the
                    bytes into its node's shard file, then committed
  baton save_async  how long ck.save_async blocks the caller (the staging
                    copy), and until fut.wait() returns (committed)
  torch.save        rank 0 writes {"model": ..., "optim": ...} with
                    torch.save, then flush + fsync; the others wait (barrier),
                    the usual DDP practice
  baton restore     ck.restore(state) on every rank, in place
  torch.load        every rank torch.load()s rank 0's file and calls
                    load_state_dict on the model and the optimizer

Times are wall seconds from a barrier to a barrier (the slowest rank). Peak
memory during a save is each rank's VmHWM minus VmRSS before the call
(Linux: /proc/self/clear_refs resets the high-water mark), the largest over
ranks. Both read back what they just wrote, but not from the same place:
torch.load finds its file in the page cache, baton reads its shards from
the disk (a save drops their pages after the fsync); bench_vs_dcp.py
--cache cold|warm gives every contender the same cache. baton's own options here:
level2=False (the shared directory only, as torch.save), keep=2.

Prints a Markdown table (the median of --rounds rounds, and the range) and,
with --json, writes every measurement.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import time

from mpi4py import MPI  # initialises MPI; baton.Runtime adopts it
import torch

import baton


def vm(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


class Peak:
    """The rise of this process's resident memory during a block (bytes)."""

    def __enter__(self):
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
        self.base = vm("VmRSS")
        return self

    def __exit__(self, *exc):
        self.rise = vm("VmHWM") - self.base
        return False


def make_state(mib, seed=0):
    torch.manual_seed(seed)
    width = 1024
    layers = max(1, (mib * 2**20) // (4 * (width * width + width)))
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])
    optim = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(16, width)
    model(x).square().mean().backward()
    optim.step()
    optim.zero_grad(set_to_none=True)
    return model, optim


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", required=True, help="a directory for both checkpoints (emptied first)")
    parser.add_argument("--mib", type=int, default=64, help="MiB of float32 parameters (default 64)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write every measurement here (rank 0)")
    parser.add_argument("--verify-replicas", type=int, choices=(0, 1), default=1,
                        help="1: Checkpointer(replicas='verify'), every rank hashes its whole replicated copy "
                             "(default); 0: replicas='rank0', rank 0's copy broadcast and saved, no hash")
    args = parser.parse_args()

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if rank == 0:
        shutil.rmtree(args.dir, ignore_errors=True)
        os.makedirs(os.path.join(args.dir, "torch"))
    comm.Barrier()
    rt = baton.Runtime()
    torch.set_num_threads(1)  # N ranks on few cores: no oversubscription inside a rank
    model, optim = make_state(args.mib)
    state = {"model": model, "optim": optim}
    state_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    state_bytes += sum(t.numel() * t.element_size() for s in optim.state_dict()["state"].values()
                       for t in s.values() if isinstance(t, torch.Tensor))
    ck = baton.Checkpointer(rt, dir=os.path.join(args.dir, "baton"), level2=False, keep=2,
                            replicas="verify" if args.verify_replicas else "rank0")
    torch_path = os.path.join(args.dir, "torch", "ckpt.pt")

    def timed(fn):
        comm.Barrier()
        t0 = time.perf_counter()
        out = fn()
        mine = time.perf_counter() - t0
        comm.Barrier()
        return comm.allreduce(mine, op=MPI.MAX), out

    def baton_save(step):
        with Peak() as p:
            ck.save(state, step)
        return p.rise, ck.last_stats()

    def baton_async(step):
        with Peak() as p:
            t0 = time.perf_counter()
            fut = ck.save_async(state, step)
            blocked = time.perf_counter() - t0
            fut.wait()
        return p.rise, blocked

    def torch_save():
        rise = 0
        if rank == 0:
            with Peak() as p:
                with open(torch_path, "wb") as f:
                    torch.save({"model": model.state_dict(), "optim": optim.state_dict()}, f)
                    f.flush()
                    os.fsync(f.fileno())
            rise = p.rise
        return rise

    def baton_restore():
        return ck.restore(state)

    def torch_load():
        sd = torch.load(torch_path, map_location="cpu")
        model.load_state_dict(sd["model"])
        optim.load_state_dict(sd["optim"])

    rows = []
    step = 0
    for r in range(args.rounds):
        m = {"round": r}
        order = ["baton", "torch"] if r % 2 == 0 else ["torch", "baton"]
        for who in order:
            if who == "baton":
                step += 1
                m["baton_save_s"], (rise, stats) = timed(lambda: baton_save(step))
                m["baton_save_rss_max"] = comm.allreduce(rise, op=MPI.MAX)
                m["baton_bytes_max"] = comm.allreduce(stats["bytes"], op=MPI.MAX)
                m["baton_total_bytes"] = stats["total_bytes"]
                phases = comm.gather(dict(stats.get("phases", {})), root=0)
                if rank == 0:
                    m["baton_save_phases_max"] = {k: max(p.get(k, 0.0) for p in phases) for k in phases[0]}
                m["baton_restore_s"], got = timed(baton_restore)
                assert got == step, (got, step)
                step += 1
                m["baton_async_total_s"], (rise, blocked) = timed(lambda: baton_async(step))
                m["baton_async_block_s"] = comm.allreduce(blocked, op=MPI.MAX)
                m["baton_async_rss_max"] = comm.allreduce(rise, op=MPI.MAX)
            else:
                m["torch_save_s"], rise = timed(torch_save)
                m["torch_save_rss"] = comm.allreduce(rise, op=MPI.MAX)
                m["torch_file_bytes"] = os.path.getsize(torch_path)
                m["torch_load_s"], _ = timed(torch_load)
        rows.append(m)
    ck.close()

    if rank == 0:
        def med(key):
            vals = [row[key] for row in rows]
            return statistics.median(vals), min(vals), max(vals)

        mib = 2**20
        print(f"ranks {size}, state {state_bytes / mib:.0f} MiB (model {args.mib} MiB + Adam), "
              f"{args.rounds} rounds, replicas={'verify' if args.verify_replicas else 'rank0'}, "
              f"load at the end: {' '.join(open('/proc/loadavg').read().split()[:3])}")
        print("| what | median s | range s | MiB/s | written per rank | peak RSS rise |")
        print("| --- | --- | --- | --- | --- | --- |")

        def line(name, key, written, rss):
            m, lo, hi = med(key)
            print(f"| {name} | {m:.3f} | {lo:.3f}-{hi:.3f} | {state_bytes / mib / m:.0f} | {written} | {rss} |")

        # Peak memory: the largest rise over the rounds (the first save
        # allocates what later ones reuse: save_async's staging copy stays).
        line("baton save (N ranks)", "baton_save_s", f"{med('baton_bytes_max')[0] / mib:.1f} MiB (max)",
             f"{med('baton_save_rss_max')[2] / mib:.1f} MiB (max)")
        line("torch.save + fsync (rank 0)", "torch_save_s", f"{med('torch_file_bytes')[0] / mib:.1f} MiB (rank 0)",
             f"{med('torch_save_rss')[2] / mib:.1f} MiB")
        line("baton save_async, blocked", "baton_async_block_s", "", f"{med('baton_async_rss_max')[2] / mib:.1f} MiB (max)")
        line("baton save_async, to committed", "baton_async_total_s", "", "")
        line("baton restore (every rank)", "baton_restore_s", "", "")
        line("torch.load + load_state_dict (every rank)", "torch_load_s", "", "")
        phases = {}
        for row in rows:
            for k, v in row["baton_save_phases_max"].items():
                phases.setdefault(k, []).append(v)
        print("baton save phases, slowest rank, median over rounds (s): " +
              ", ".join(f"{k} {statistics.median(v):.3f}" for k, v in phases.items()))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"ranks": size, "state_bytes": state_bytes, "mib": args.mib, "rounds": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
