#!/opt/baton-venv/bin/python
"""baton.lightning.CheckpointIO against Lightning's own TorchCheckpointIO, on one DDP state.

Run under mpirun, at most one rank per core, on one node (4 rounds: each contender comes
first twice):

    tests/lib/mpirun-ranks 2 /opt/baton-venv/bin/python python/bench/bench_lightning_io.py \\
        --dir /tmp/bench-lightning --mib 16

The state is bench_vs_dcp's "ddp" (Linear layers and AdamW, float32, --mib MiB in all, every rank
the same) inside the checkpoint dict Lightning's Trainer hands a CheckpointIO (state_dict,
optimizer_states, loops, callbacks, global_step, ...). No Trainer runs: each contender's
save_checkpoint and load_checkpoint are called as Lightning's strategies call them.
  baton        baton.lightning.CheckpointIO over a baton.Checkpointer (level 3 only, keep=2):
               save_checkpoint on every rank (baton.lightning.DDPStrategy: the save is
               collective, each rank writes its share; every byte hashed), load_checkpoint
               on every rank (every byte verified; the tensors new)
  torch        lightning's TorchCheckpointIO (what DDPStrategy uses by default): rank 0
               save_checkpoint (torch.save into memory, then one write and a rename; no
               fsync, so the file may not survive a crash of the node), every rank
               load_checkpoint (torch.load; verifies nothing)
  torch+fsync  the same save, then an fsync of the file and its directory: what baton's save
               promises (the version is on the disk when the call returns)
A load is timed with what Lightning does next: model.load_state_dict(checkpoint["state_dict"])
and optimizer.load_state_dict(checkpoint["optimizer_states"][0]). Times: wall seconds from a
barrier to a barrier (the slowest rank), medians over --rounds after --warmup untimed rounds; peak memory: the largest rise of
a rank's resident memory during the call. --cache warm (default) reads every contender's files
once before its load (a restart on the same node, pages cached); cold drops them from the page
cache first.
"""
import argparse
import datetime
import os
import shutil
import statistics
import sys

from mpi4py import MPI  # initialises MPI; baton.Runtime adopts it
import torch
import torch.distributed as dist
from lightning.pytorch.plugins.io import TorchCheckpointIO

import baton
import baton.lightning as bl
from bench_vs_dcp import make_state, set_page_cache, timed_call  # the same state and measurements as the DCP bench


def lightning_checkpoint(model, optim, step):
    """The dict Lightning's Trainer builds for a CheckpointIO (trainer/connectors/checkpoint_connector.py)."""
    return {"epoch": 0, "global_step": step, "pytorch-lightning_version": "2.6.6",
            "state_dict": model.state_dict(),
            "loops": {"fit_loop": {"state_dict": {}, "epoch_progress": {"total": {"ready": 1, "completed": 0}},
                                   "epoch_loop.batch_progress": {"total": {"ready": step, "completed": step}}}},
            "callbacks": {"ModelCheckpoint{'monitor': None}": {"best_model_score": None, "best_k_models": {}}},
            "optimizer_states": [optim.state_dict()], "lr_schedulers": [], "hparams_name": "kwargs",
            "hyper_parameters": {"width": 512}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", required=True, help="a directory of the bench's own (emptied first)")
    parser.add_argument("--mib", type=int, default=16, help="the state's size, MiB (parameters + AdamW's two)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (a process's first large "
                        "allocations and imports)")
    parser.add_argument("--cache", choices=("warm", "cold"), default="warm")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    rt = baton.Runtime()
    baton.init_process_group(rt, backend="gloo")
    if rank == 0:
        shutil.rmtree(args.dir, ignore_errors=True)
        os.makedirs(args.dir)
    comm.Barrier()
    model, optim = make_state(args.mib, "ddp")
    state_bytes = sum(t.nbytes for t in model.state_dict().values()) + sum(
        t.nbytes for s in optim.state_dict()["state"].values() for t in s.values() if torch.is_tensor(t))
    baton_io = bl.CheckpointIO(baton.Checkpointer(rt, dir=os.path.join(args.dir, "baton"), level2=False, keep=2))
    torch_io = TorchCheckpointIO()
    step = {"n": 0}

    def set_cache(*dirs):
        set_page_cache(comm, args.cache, dirs)

    def timed(fn):
        return timed_call(comm, fn)[:2]

    def into_model(checkpoint):
        model.load_state_dict(checkpoint["state_dict"])
        optim.load_state_dict(checkpoint["optimizer_states"][0])

    def run_baton(m):
        step["n"] += 1
        ckpt = lightning_checkpoint(model, optim, step["n"])
        path = os.path.join(args.dir, "pointers", "last.ckpt")
        m["baton save"] = timed(lambda: baton_io.save_checkpoint(ckpt, path))
        set_cache(os.path.join(args.dir, "baton"))
        m["baton load"] = timed(lambda: into_model(baton_io.load_checkpoint(path)))

    def run_torch(m, fsync):
        step["n"] += 1
        ckpt = lightning_checkpoint(model, optim, step["n"])
        path = os.path.join(args.dir, "torch", "last.ckpt")
        name = "torch+fsync" if fsync else "torch"

        def save():
            if rank == 0:  # Lightning's DDPStrategy saves on rank 0 only
                torch_io.save_checkpoint(ckpt, path)
                if fsync:
                    fd = os.open(path, os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                    fd = os.open(os.path.dirname(path), os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
        m[name + " save"] = timed(save)
        set_cache(os.path.dirname(path))
        m[name + " load"] = timed(lambda: into_model(torch_io.load_checkpoint(path, weights_only=False)))

    contenders = [("baton", run_baton), ("torch", lambda m: run_torch(m, False)),
                  ("torch+fsync", lambda m: run_torch(m, True))]
    orders = [(0, 1, 2), (2, 1, 0), (1, 2, 0), (0, 2, 1)]
    rows = []
    for r in range(-args.warmup, args.rounds):
        m = {}
        for i in orders[r % len(orders)]:
            contenders[i][1](m)
        if r >= 0:
            rows.append(m)
    baton_io.checkpointer.close()
    if rank == 0:
        keys = list(rows[0])
        med = {k: statistics.median(row[k][0] for row in rows) for k in keys}
        peak = {k: max(row[k][1] for row in rows) for k in keys}
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        print(f"# bench_lightning_io: {size} ranks, ddp {args.mib} MiB ({state_bytes / 2**20:.1f} MiB a rank), "
              f"{args.rounds} rounds, cache {args.cache}, {when}, load {os.getloadavg()[0]:.2f}")
        for k in sorted(keys, key=lambda k: (k.split()[-1], k)):
            print(f"{k:20s} {med[k]:.4f} s  peak {peak[k] / 2**20:7.1f} MiB  per round "
                  + " ".join(f"{row[k][0]:.4f}" for row in rows))
        for op in ("save", "load"):
            b = med["baton " + op]
            print(f"baton {op} / torch {op}: {b / med['torch ' + op]:.2f}; / torch+fsync {op}: "
                  f"{b / med['torch+fsync ' + op]:.2f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
