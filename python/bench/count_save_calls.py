#!/opt/baton-venv/bin/python
"""What one small save (or load) costs beyond its bytes, per rank, counted.

    mpicc -shared -fPIC -O1 -o /tmp/libmpicount.so python/bench/mpi_call_counter.c -ldl
    PYTHONPATH=_build/python LD_PRELOAD=/tmp/libmpicount.so tests/lib/mpirun-ranks 2 -x LD_PRELOAD \\
        /opt/baton-venv/bin/python python/bench/count_save_calls.py --dir /tmp/count --what baton-dcp

--what: baton-dcp (dcp.save with BatonWriter), baton-dcp-async (dcp.async_save
with BatonWriter, until its future completes), baton-dcp-load (dcp.load
with BatonReader), baton (baton.Checkpointer.save), baton-restore
(baton.Checkpointer.restore of what it saved, the checkpointer kept
open), dcp-fs (dcp.save with
FileSystemWriter: DCP's own collectives go through gloo, not MPI, and are
not counted here); the C++ core through its thin binding, baton.ArrayCheckpointer
(one replicated and one sharded array, 4 MiB per rank, one checkpointer open
across the calls): array-save (save), array-restore (restore of what a save
wrote), array-async (save_async, the second call completing the first), and
array-open (opening and closing the checkpointer). Two saves of 6 Linear(512) layers + AdamW (19 MiB, DDP:
every rank the whole state); the second is the steady state (the first
also opens what a process opens once); the array-* modes count three calls.
Counted (python/bench/mpi_call_counter.c): MPI collectives by kind, fsyncs,
files created, JSON files read (one parse each), renames, directory
listings, threads started. Counting, not timing: it holds on a loaded machine.
"""
import argparse
import ctypes
import datetime
import os
import shutil

from mpi4py import MPI  # initialises MPI; baton.Runtime adopts it
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemWriter
from torch.distributed.checkpoint.state_dict import get_state_dict

import baton
from baton.dcp import BatonReader, BatonWriter


ARRAY_MODES = ("array-save", "array-restore", "array-async", "array-open")


def count_array_checkpointer(what, d, comm, counter):
    """The C++ ArrayCheckpointer's fixed costs: three calls, each counted."""
    import numpy as np
    rank, size = comm.Get_rank(), comm.Get_size()
    rt = baton.Runtime()
    rows = 1024  # of 1 KiB: 1 MiB replicated, 3 MiB sharded per rank
    w = np.arange(rows * 256, dtype=np.float32).reshape(rows, 256)
    emb = np.full((3 * rows, 256), rank, dtype=np.float32)

    def open_ck():
        ck = baton.ArrayCheckpointer(rt, dir=os.path.join(d, "a"), keep=2)
        ck.register_replicated("w", w)
        ck.register_sharded("emb", emb, offset=3 * rows * rank, global_shape=(3 * rows * size, 256))
        return ck

    if what == "array-open":
        for s in (1, 2, 3):
            comm.Barrier()
            counter.mpicount_reset()
            open_ck().close()
            counter.mpicount_dump(("%s %d" % (what, s)).encode())
            comm.Barrier()
        rt.close()
        return
    ck = open_ck()
    if what == "array-restore":
        ck.save(1)
    for s in (1, 2, 3):
        comm.Barrier()
        counter.mpicount_reset()
        if what == "array-save":
            ck.save(s)
        elif what == "array-async":
            ck.save_async(s)
        else:
            ck.restore()
        counter.mpicount_dump(("%s %d" % (what, s)).encode())
        comm.Barrier()
    if what == "array-async":
        counter.mpicount_reset()
        ck.wait()
        counter.mpicount_dump(("%s wait" % what).encode())
    ck.close()
    rt.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", required=True, help="a directory for the checkpoints (emptied first)")
    parser.add_argument("--what", choices=ARRAY_MODES + ("baton-dcp", "baton-dcp-async", "baton-dcp-load", "baton", "baton-restore", "dcp-fs"), required=True)
    args = parser.parse_args()
    try:
        counter = ctypes.CDLL(None)
        counter.mpicount_reset
    except AttributeError:
        raise SystemExit("count_save_calls.py: run it with LD_PRELOAD=libmpicount.so (python/bench/mpi_call_counter.c)")
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    d = args.dir
    if rank == 0:
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    comm.Barrier()
    if args.what in ARRAY_MODES:
        count_array_checkpointer(args.what, d, comm, counter)
        return
    dist.init_process_group("gloo", init_method="file://" + os.path.join(d, ".store"), rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=120))
    rt = baton.Runtime()
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(6)])
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(8, 512)).square().mean().backward()
    optim.step()

    def state():
        m, o = get_state_dict(model, optim)
        return {"model": m, "optim": o}

    ck = None
    for s in (1, 2):
        comm.Barrier()
        counter.mpicount_reset()
        if args.what == "baton-dcp":
            dcp.save(state(), storage_writer=BatonWriter(os.path.join(d, "b"), step=s, keep=2, runtime=rt))
        elif args.what == "baton-dcp-async":
            dcp.async_save(state(), storage_writer=BatonWriter(os.path.join(d, "b"), step=s, keep=2,
                                                               runtime=rt)).result()
        elif args.what == "baton-dcp-load":
            if s == 1:
                dcp.save(state(), storage_writer=BatonWriter(os.path.join(d, "b"), step=s, keep=2, runtime=rt))
                counter.mpicount_reset()
            dcp.load(state(), storage_reader=BatonReader(os.path.join(d, "b"), runtime=rt))
        elif args.what == "baton-restore":
            if ck is None:
                ck = baton.Checkpointer(rt, dir=os.path.join(d, "c"), level2=False, keep=2)
                ck.save({"model": model, "optim": optim}, 1)
                counter.mpicount_reset()
            ck.restore({"model": model, "optim": optim})
        elif args.what == "baton":
            if ck is None:
                ck = baton.Checkpointer(rt, dir=os.path.join(d, "c"), level2=False, keep=2)
                counter.mpicount_reset()
            ck.save({"model": model, "optim": optim}, s)
        else:
            dcp.save(state(), storage_writer=FileSystemWriter(os.path.join(d, "fs%d" % s)))
        counter.mpicount_dump(("%s %d" % (args.what, s)).encode())
        comm.Barrier()
    if ck is not None:
        ck.close()
    rt.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
