#!/opt/baton-venv/bin/python
"""Restores only: baton.Checkpointer.restore beside dcp.load with FileSystemReader, one state, in one run.

    tests/lib/mpirun-ranks 2 /opt/baton-venv/bin/python python/bench/bench_restore_only.py KIND MIB ROUNDS DIR

KIND and MIB as bench_vs_dcp.py's --kind (ddp, fsdp2) and --mib; each saved once, then restored
ROUNDS times, the two alternating (the order flipped every round); wall seconds of the slowest rank
from a barrier, and its process CPU seconds (less moved by other jobs on a shared machine than the
wall time), medians, and baton's over DCP's. To compare two builds, run it under each build's
PYTHONPATH one after the other (docs/benchmarks.md, run h).
"""
import datetime, os, shutil, statistics, sys, time
from mpi4py import MPI
import torch, torch.distributed as dist, torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baton
from bench_vs_dcp import make_state
kind, mib, rounds, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
comm = MPI.COMM_WORLD; rank, size = comm.Get_rank(), comm.Get_size()
if rank == 0:
    shutil.rmtree(d, ignore_errors=True); os.makedirs(d)
comm.Barrier()
dist.init_process_group("gloo", init_method="file://" + os.path.join(d, ".store"), rank=rank, world_size=size,
                        timeout=datetime.timedelta(seconds=600))
rt = baton.Runtime(); torch.set_num_threads(1)
model, optim = make_state(mib, kind)
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
ck = baton.Checkpointer(rt, dir=os.path.join(d, "baton"), level2=False, keep=2)
st = {"model": model, "optim": optim}
ck.save(st, 1)
msd, osd = get_state_dict(model, optim)
dcp.save({"model": msd, "optim": osd}, storage_writer=FileSystemWriter(os.path.join(d, "dcp")))
def t_baton():
    ck.restore(st)
def t_dcp():
    msd, osd = get_state_dict(model, optim)
    sd = {"model": msd, "optim": osd}
    dcp.load(sd, storage_reader=FileSystemReader(os.path.join(d, "dcp")))
    set_state_dict(model, optim, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
res = {"baton": [], "dcp": []}
fns = [("baton", t_baton), ("dcp", t_dcp)]
for r in range(rounds):
    for name, fn in (fns if r % 2 == 0 else fns[::-1]):
        comm.Barrier()
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        w, c = time.perf_counter() - w0, time.process_time() - c0
        w = comm.allreduce(w, op=MPI.MAX); c = comm.allreduce(c, op=MPI.MAX)
        res[name].append((w, c))
if rank == 0:
    out = []
    for k, v in res.items():
        out.append("%s wall %.3f cpu %.3f" % (k, statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)))
    bw = statistics.median(x[0] for x in res["baton"]) / statistics.median(x[0] for x in res["dcp"])
    bc = statistics.median(x[1] for x in res["baton"]) / statistics.median(x[1] for x in res["dcp"])
    print(" | ".join(out), "| baton/dcp wall %.2f cpu %.2f | load %s" % (bw, bc, open("/proc/loadavg").read().split()[0]))
ck.close()
dist.destroy_process_group()
