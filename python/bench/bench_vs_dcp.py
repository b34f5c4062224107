#!/opt/baton-venv/bin/python
"""baton against torch.distributed.checkpoint (DCP) and per-rank torch.save, on one state.

Run under mpirun, at most one rank per core, on one node (4 rounds: each contender comes
first once and follows each other once; see WILLIAMS):

    tests/lib/mpirun-ranks 2 /opt/baton-venv/bin/python python/bench/bench_vs_dcp.py \\
        --dir /tmp/bench-dcp --mib 16 --kind ddp

Three states (--kind), of --mib MiB in all (parameters + AdamW's exp_avg and
exp_avg_sq, float32; Linear layers of width 1024, 512 under 192 MiB):
  ddp    every rank holds the whole state, the same (DDP): plain tensors;
  fsdp2  fully_shard (FSDP2, gloo on CPU): DTensor parameters and optimizer
         state, each rank 1/N of it (get_state_dict / set_state_dict);
  tiny   5,000 tensors of 64 floats (1,250 parameters, AdamW's three
         tensors each), every rank the same: the cost per tensor;
  sharded  the ddp state's tensors split by rows over the ranks, each rank
         holding 1/N of every one (ZeRO-style): baton.Checkpointer gets
         baton.Sharded rows, DCP the same rows as DTensors (Shard(0)),
         torch.save each rank's own rows; every contender saves and
         restores the same tensors in place.
What each contender saves and restores, in the same run, in another order
every round (--rounds, 4 for a balanced design):
  baton            baton.Checkpointer save / save_async / restore of
                   {"model": model, "optim": optim} (fsdp2: DTensor leaves,
                   each rank writing its own boxes)
  baton-dcp        dcp.save / dcp.async_save / dcp.load with baton.dcp's
                   BatonWriter / BatonReader (baton's format: every byte
                   hashed at save and verified at load)
  dcp-fs           dcp.save / dcp.async_save / dcp.load with FileSystemWriter
                   / FileSystemReader (one directory per save; no checksum)
  torch            ddp: rank 0 torch.save()s the state dict + fsync, every
                   rank torch.load()s it; fsdp2: every rank torch.save()s its
                   own shards' state dict + fsync and loads its own file
Times: wall seconds from a barrier to a barrier (the slowest rank). async:
"blocked" is how long the call held the caller, "total" until committed
(fut.wait() / future.result()). Peak memory: the largest rise of a rank's
resident memory (VmHWM after /proc/self/clear_refs) during the call. The
restore reads back what was just written; --cache says from where:
  as-written  each writer leaves the page cache as it leaves it for a job:
              DCP and torch.save leave their files' pages cached, baton
              drops its shards' pages after their fsync (posix_fadvise
              DONTNEED, so that checkpoints do not crowd the job's memory),
              so baton reads from the disk and the others from memory;
  cold        every contender's files are dropped from the page cache before
              its restore (a restart on another node, or after the pages
              were reclaimed);
  warm        every contender's files are read once before its restore (a
              restart on the same node with the pages still cached).
Each timed call starts after gc.collect() on every rank, so that a full
collection another contender's garbage triggered is not timed as this one's.
--parts also prints where rank 0's Checkpointer restore went: the
extension's phases (the call's agreement, the attempt mark, the manifest,
the reads, hashes and copies, ...) and the rest of the call, Python's.
"""
import argparse
import datetime
import gc
import json
import os
import shutil
import statistics
import sys
import time

from mpi4py import MPI  # initialises MPI; baton.Runtime adopts it
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter

import baton
from baton.dcp import BatonReader, BatonWriter


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
            f.write("5")
        self.base = vm("VmRSS")
        return self

    def __exit__(self, *exc):
        self.rise = vm("VmHWM") - self.base
        return False


class Tiny(torch.nn.Module):
    """1,250 parameters of 64 floats: with AdamW's exp_avg, exp_avg_sq and step, 5,000 tensors (issue 48 item 5)."""

    def __init__(self, count=1250, width=64):
        super().__init__()
        self.p = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(width)) for _ in range(count)])

    def forward(self, x):
        return sum((p * x).sum() for p in self.p)


class ShardedRows:
    """--kind sharded: this rank's rows of every tensor of a ddp state (0-dim ones whole on every rank), in one
    tree per contender over the same memory: baton.Sharded leaves, DTensors (Shard(0)) for DCP, the plain rows
    for torch.save."""

    def __init__(self, model, optim, rank, size):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import DTensor, Shard

        mesh = init_device_mesh("cpu", (size,))
        self.plain, self.baton, self.dcp = {}, {}, {}
        osd = optim.state_dict()["state"]
        trees = {"model": model.state_dict(),
                 "optim": {str(i): dict(st) for i, st in osd.items()}}
        for top, tree in trees.items():
            for path, t in _leaves(tree):
                if t.dim() == 0:
                    rows = b = d = t.clone()
                else:
                    n = t.shape[0]
                    if n % size:
                        raise SystemExit(f"--kind sharded: {top}/{'/'.join(path)} has {n} rows, not a multiple of "
                                         f"{size} ranks")
                    lo, hi = rank * n // size, (rank + 1) * n // size
                    rows = t[lo:hi].clone()
                    b = baton.Sharded(rows, lo, tuple(t.shape))
                    d = DTensor.from_local(rows, mesh, [Shard(0)], run_check=False, shape=t.shape, stride=t.stride())
                for tree_out, leaf in ((self.plain, rows), (self.baton, b), (self.dcp, d)):
                    node = tree_out.setdefault(top, {})
                    for key in path[:-1]:
                        node = node.setdefault(key, {})
                    node[path[-1]] = leaf

    def load_plain(self, sd):
        """torch's restore: the rows torch.load read, copied into the state's own (load_state_dict's work)."""
        with torch.no_grad():
            for top in self.plain:
                for path, t in _leaves(self.plain[top]):
                    src = sd[top]
                    for key in path:
                        src = src[key]
                    t.copy_(src)


def _leaves(tree, prefix=()):
    for k, v in tree.items():
        if isinstance(v, dict):
            yield from _leaves(v, prefix + (str(k),))
        elif isinstance(v, torch.Tensor):
            yield prefix + (str(k),), v


def make_state(mib, kind):
    torch.manual_seed(0)
    if kind == "tiny":
        model = Tiny()
        optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
        model(torch.randn(64)).square().backward()
        optim.step()
        optim.zero_grad(set_to_none=True)
        return model, optim
    width = 1024 if mib >= 192 else 512
    # parameters are a third of the state (AdamW keeps two more of the same size)
    layers = max(1, round((mib * 2**20 / 3) / (4 * (width * width + width))))
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])
    if kind == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        for layer in model:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(8, width)).square().mean().backward()
    optim.step()
    optim.zero_grad(set_to_none=True)
    return model, optim


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", required=True,
                        help="a directory for every checkpoint (emptied first, removed at the end)")
    parser.add_argument("--keep-files", action="store_true", help="leave --dir's checkpoints in place at the end")
    parser.add_argument("--mib", type=int, default=16, help="MiB of state in all (default 16)")
    parser.add_argument("--kind", choices=("ddp", "fsdp2", "tiny", "sharded"), default="ddp",
                        help="tiny: 5,000 tensors of 64 floats, every rank the same (--mib ignored)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--json", help="write every measurement here (rank 0)")
    parser.add_argument("--cache", choices=("as-written", "cold", "warm"), default="as-written",
                        help="the page cache before each restore (see above; default as-written)")
    parser.add_argument("--parts", action="store_true",
                        help="also print where rank 0's Checkpointer restore went: the extension's phases "
                             "and the rest of the call (Python)")
    args = parser.parse_args()

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if rank == 0:
        shutil.rmtree(args.dir, ignore_errors=True)
        os.makedirs(args.dir)
    comm.Barrier()
    dist.init_process_group("gloo", init_method="file://" + os.path.join(args.dir, ".store"), rank=rank,
                            world_size=size, timeout=datetime.timedelta(seconds=600))
    rt = baton.Runtime()
    torch.set_num_threads(1)
    model, optim = make_state(args.mib, args.kind)
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    split = ShardedRows(model, optim, rank, size) if args.kind == "sharded" else None
    per_rank = args.kind in ("fsdp2", "sharded")  # each rank holds (and torch.save writes) its own part

    def dcp_state():
        if split is not None:
            return split.dcp  # loaded in place, into the rows themselves
        msd, osd = get_state_dict(model, optim)
        return {"model": msd, "optim": osd}

    def put_dcp_state(sd):
        if split is None:
            set_state_dict(model, optim, model_state_dict=sd["model"], optim_state_dict=sd["optim"])

    local = sum(t.to_local().nbytes if hasattr(t, "to_local") else t.nbytes
                for t in _tensors(dcp_state()))
    state_bytes = comm.allreduce(local) if per_rank else local

    ck = baton.Checkpointer(rt, dir=os.path.join(args.dir, "baton"), level2=False, keep=2)
    baton_state = split.baton if split is not None else {"model": model, "optim": optim}
    counters = {"step": 0}

    def next_step():
        counters["step"] += 1
        return counters["step"]

    def set_cache(*dirs):
        set_page_cache(comm, args.cache, dirs)

    def timed(fn):
        return timed_call(comm, fn)

    restore_parts = []  # per round, this rank: where its Checkpointer restore went (--parts)

    def restore_and_time():
        t0 = time.perf_counter()
        ck.restore(baton_state)
        whole = time.perf_counter() - t0
        stats = ck.last_stats()
        parts = dict(stats["phases"])
        parts["the rest of the call (Python)"] = whole - stats["seconds"]
        parts["whole"] = whole
        restore_parts.append(parts)

    def run_baton(m):
        s = next_step()
        m["baton save"] = timed(lambda: ck.save(baton_state, s))[:2]
        set_cache(os.path.join(args.dir, "baton"))
        m["baton restore"] = timed(restore_and_time)[:2]
        s = next_step()
        blocked = {}

        def go():
            t0 = time.perf_counter()
            fut = ck.save_async(baton_state, s)
            blocked["s"] = time.perf_counter() - t0
            fut.wait()
        m["baton async total"] = timed(go)[:2]
        m["baton async blocked"] = (comm.allreduce(blocked["s"], op=MPI.MAX), None)

    def run_dcp(m, name, writer_of, reader_of, files_of):
        s = next_step()
        m[name + " save"] = timed(lambda: dcp.save(dcp_state(), storage_writer=writer_of(s)))[:2]
        set_cache(files_of(s))
        m[name + " restore"] = timed(lambda: _load(reader_of(s)))[:2]
        s = next_step()
        blocked = {}

        def go():
            t0 = time.perf_counter()
            fut = dcp.async_save(dcp_state(), storage_writer=writer_of(s))
            blocked["s"] = time.perf_counter() - t0
            fut.result()
        m[name + " async total"] = timed(go)[:2]
        m[name + " async blocked"] = (comm.allreduce(blocked["s"], op=MPI.MAX), None)

    def _load(reader):
        sd = dcp_state()
        dcp.load(sd, storage_reader=reader)
        put_dcp_state(sd)

    bdir = os.path.join(args.dir, "baton-dcp")
    fdir = os.path.join(args.dir, "dcp-fs")

    def fs_writer(s):
        if rank == 0:  # keep two, as baton does (keep=2)
            shutil.rmtree(os.path.join(fdir, "step%d" % (s - 4)), ignore_errors=True)
        return FileSystemWriter(os.path.join(fdir, "step%d" % s))

    def run_torch(m):
        path = os.path.join(args.dir, "torch", "rank%d.pt" % (rank if per_rank else 0))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        writes = per_rank or rank == 0

        def save():
            if writes:
                with open(path, "wb") as f:
                    torch.save(split.plain if split is not None else
                               {"model": model.state_dict(), "optim": optim.state_dict()}, f)
                    f.flush()
                    os.fsync(f.fileno())

        def load():
            sd = torch.load(path, map_location="cpu", weights_only=False)
            if split is not None:
                split.load_plain(sd)
                return
            model.load_state_dict(sd["model"])
            optim.load_state_dict(sd["optim"])
        m["torch save"] = timed(save)[:2]
        set_cache(os.path.dirname(path))
        m["torch restore"] = timed(load)[:2]

    contenders = ["baton-dcp", "dcp-fs", "torch", "baton"]
    rows = []
    for r in range(args.rounds):
        m = {}
        order = [contenders[i] for i in WILLIAMS[r % len(WILLIAMS)]]
        for who in order:
            if who == "baton":
                run_baton(m)
            elif who == "baton-dcp":
                run_dcp(m, who, lambda s: BatonWriter(bdir, step=s, runtime=rt, keep=2),
                        lambda s: BatonReader(bdir, runtime=rt), lambda s: bdir)
            elif who == "dcp-fs":
                run_dcp(m, who, fs_writer, lambda s: FileSystemReader(os.path.join(fdir, "step%d" % s)),
                        lambda s: os.path.join(fdir, "step%d" % s))
            else:
                run_torch(m)
        m["order"] = order
        rows.append(m)
    ck.close()
    BatonWriter(bdir).close()  # the directory's checkpointer and the staged copy it kept

    if rank == 0:
        mib = 2**20
        print(f"{args.kind}, cache {args.cache}, ranks {size}, state {state_bytes / mib:.0f} MiB in all, {args.rounds} rounds "
              f"(orders {[' '.join(r['order']) for r in rows]}), load at the end: "
              f"{' '.join(open('/proc/loadavg').read().split()[:3])}")
        print("| what | median s | range s | peak RSS rise (max over rounds, ranks) |")
        print("| --- | --- | --- | --- |")
        keys = [k for k in rows[0] if k != "order"]
        for op in ("save", "async blocked", "async total", "restore"):
            for k in keys:
                if k.endswith(" " + op):
                    t = [row[k][0] for row in rows]
                    rss = [row[k][1] for row in rows if row[k][1] is not None]
                    print(f"| {k} | {statistics.median(t):.3f} | {min(t):.3f}-{max(t):.3f} | "
                          f"{(max(rss) / mib if rss else float('nan')):.1f} MiB |")
        # The ratios the goals are stated in (issue 48): each of baton's two front ends (one format since
        # 2026-12-06: the same versions) over DCP's FileSystemWriter/Reader and over torch.save/torch.load
        # (below 1: baton faster), medians of the same run.
        med = {k: statistics.median(row[k][0] for row in rows) for k in keys}
        print("\n| op | baton / dcp-fs | baton-dcp / dcp-fs | baton / torch | baton-dcp / torch |")
        print("| --- | --- | --- | --- | --- |")
        for op in ("save", "async blocked", "async total", "restore"):
            def ratio(a, b):
                return f"{med[a] / med[b]:.2f}" if a in med and b in med and med[b] > 0 else "-"
            print(f"| {op} | {ratio('baton ' + op, 'dcp-fs ' + op)} | {ratio('baton-dcp ' + op, 'dcp-fs ' + op)} | "
                  f"{ratio('baton ' + op, 'torch ' + op)} | {ratio('baton-dcp ' + op, 'torch ' + op)} |")
        if args.parts:
            # Why a restore takes what it takes (issue 48: a goal missed is shown with a profile): the
            # extension's phases (CheckpointStats::phases, include/baton/checkpointer.h) and the rest of
            # baton.Checkpointer.restore, which is Python's (the plan, its agreements, the match, the
            # binding, the objects' load_state_dict), on this rank.
            print(f"\nWhere rank 0's `baton.Checkpointer.restore` went, ms (medians of {len(restore_parts)} restores):")
            print("| part | ms |")
            print("| --- | ---: |")
            for name in restore_parts[0]:
                print(f"| {name} | {1000 * statistics.median(p[name] for p in restore_parts):.2f} |")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"kind": args.kind, "cache": args.cache, "ranks": size, "state_bytes": state_bytes, "rounds": rows,
                           "restore_parts_rank0": restore_parts}, f, indent=1)
    dist.destroy_process_group()
    comm.Barrier()
    if rank == 0 and not args.keep_files:
        # Two versions of each of four contenders (11 GB at --mib 1024): a series of runs filled the disk.
        shutil.rmtree(args.dir, ignore_errors=True)
    return 0


# The orders of the rounds: a balanced Latin square (Williams) of the 4 contenders, so that over 4
# rounds each comes first once and follows each other contender once. A cyclic rotation kept the
# neighbours: baton followed torch in every round, and at 1 GiB its save met the disk still
# writing back torch's (baton's 1 GiB save 3-5 s there, against 1.0-1.5 s in a run of its own).
WILLIAMS = ((0, 1, 3, 2), (1, 2, 0, 3), (2, 3, 1, 0), (3, 0, 2, 1))


def timed_call(comm, fn):
    """(the slowest rank's wall seconds, the largest rise of a rank's resident memory, fn's result) of ``fn()``,
    from a barrier to a barrier, after gc.collect() on every rank (another call's garbage is not timed)."""
    gc.collect()
    comm.Barrier()
    with Peak() as p:
        t0 = time.perf_counter()
        out = fn()
        mine = time.perf_counter() - t0
    comm.Barrier()
    return comm.allreduce(mine, op=MPI.MAX), comm.allreduce(p.rise, op=MPI.MAX), out


def set_page_cache(comm, cache, dirs):
    """``cache`` ("cold", "warm" or "as-written") for the files under ``dirs`` (rank 0: the ranks share one
    node's page cache), then a barrier."""
    if cache != "as-written" and comm.rank == 0:
        for path in _files(dirs):
            try:
                f = open(path, "rb")
            except FileNotFoundError:  # a version retention removes meanwhile (baton renames it .removing-*)
                continue
            with f:
                if cache == "cold":
                    os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)  # written and fsynced: clean
                else:
                    while f.read(8 << 20):
                        pass
    comm.Barrier()


def _files(dirs):
    for d in dirs:
        for root, subdirs, names in os.walk(d):
            subdirs[:] = [s for s in subdirs if not s.startswith(".removing-")]  # retention's, being removed
            for n in names:
                if not n.endswith(".lock"):
                    yield os.path.join(root, n)


def _tensors(sd):
    if isinstance(sd, dict):
        for v in sd.values():
            yield from _tensors(v)
    elif isinstance(sd, torch.Tensor):
        yield sd


if __name__ == "__main__":
    sys.exit(main())
