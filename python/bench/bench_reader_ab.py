#!/opt/baton-venv/bin/python
"""dcp.load through BatonReader of two trees side by side in one process: another tree's reader.py (loaded
from its path; the rest of baton this tree's) and this tree's, alternating every round over one saved state.

    PYTHONPATH=_build/python tests/lib/mpirun-ranks 2 /opt/baton-venv/bin/python \
        python/bench/bench_reader_ab.py KIND MIB ROUNDS DIR /work/main/python/baton/dcp/reader.py

KIND and MIB as bench_vs_dcp.py's. Medians of the slowest rank's wall and CPU seconds, and the largest
peak RSS rise (VmHWM after /proc/self/clear_refs) of a load, per reader; the same machine load for both.
"""
import datetime, importlib.util, os, shutil, statistics, sys, time
from mpi4py import MPI
import torch, torch.distributed as dist, torch.distributed.checkpoint as dcp
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baton
from baton.dcp import BatonReader, BatonWriter
from bench_vs_dcp import make_state, Peak
kind, mib, rounds, d, base_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
spec = importlib.util.spec_from_file_location("base_reader", base_path)
base = importlib.util.module_from_spec(spec); spec.loader.exec_module(base)
comm = MPI.COMM_WORLD; rank, size = comm.Get_rank(), comm.Get_size()
if rank == 0:
    shutil.rmtree(d, ignore_errors=True); os.makedirs(d)
comm.Barrier()
dist.init_process_group("gloo", init_method="file://" + os.path.join(d, ".store"), rank=rank, world_size=size,
                        timeout=datetime.timedelta(seconds=600))
rt = baton.Runtime(); torch.set_num_threads(1)
model, optim = make_state(mib, kind)
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
msd, osd = get_state_dict(model, optim)
dcp.save({"model": msd, "optim": osd}, storage_writer=BatonWriter(os.path.join(d, "b"), runtime=rt))
def load(cls):
    msd, osd = get_state_dict(model, optim)
    sd = {"model": msd, "optim": osd}
    dcp.load(sd, storage_reader=cls(os.path.join(d, "b"), runtime=rt))
    set_state_dict(model, optim, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
res = {"base": [], "branch": []}
for r in range(rounds):
    for who in (("base", "branch") if r % 2 == 0 else ("branch", "base")):
        cls = base.BatonReader if who == "base" else BatonReader
        comm.Barrier()
        with Peak() as p:
            t0, c0 = time.perf_counter(), time.process_time()
            load(cls)
            w, c = time.perf_counter() - t0, time.process_time() - c0
        res[who].append((comm.allreduce(w, op=MPI.MAX), comm.allreduce(c, op=MPI.MAX), comm.allreduce(p.rise, op=MPI.MAX)))
if rank == 0:
    m = {k: [statistics.median(x[i] for x in v) for i in range(2)] + [max(x[2] for x in v) / 2**20] for k, v in res.items()}
    print("%s %d MiB, %d rounds, load %s: base wall %.3f cpu %.3f peak %.1f MiB | branch wall %.3f cpu %.3f peak %.1f MiB | branch/base wall %.2f cpu %.2f"
          % (kind, mib, rounds, " ".join(open("/proc/loadavg").read().split()[:3]), *m["base"], *m["branch"],
             m["branch"][0] / m["base"][0], m["branch"][1] / m["base"][1]))
rt.close(); dist.destroy_process_group()
