"""Run by tests/install/test_pip_install.sh under mpirun (2 ranks) with the
interpreter of a fresh virtual environment into which baton's wheel was
pip-installed: a Checkpointer save and restore of a model and its optimizer,
and dcp.save/async_save/dcp.load through baton.dcp, each restored state equal to the
saved one bit for bit. argv: a checkpoint directory, the torch version expected."""
import os
import sys

import torch
import torch.distributed.checkpoint as dcp

import baton
from baton.dcp import BatonReader, BatonWriter

ckpt_dir, want_torch = sys.argv[1], sys.argv[2]
assert torch.__version__.split("+")[0] == want_torch, (torch.__version__, want_torch)
assert os.path.realpath(baton.__file__).startswith(os.path.realpath(sys.prefix)), (baton.__file__, sys.prefix)

rt = baton.Runtime()
baton.init_process_group(rt)
torch.manual_seed(7)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
opt = torch.optim.AdamW(model.parameters(), lr=0.01)
model(torch.randn(5, 8)).sum().backward()
opt.step()

state = {"model": model, "optim": opt, "rng": baton.RNGState()}
ck = baton.Checkpointer(rt, dir=os.path.join(ckpt_dir, "checkpointer"))
ck.save(state, 1)
saved = {k: v.clone() for k, v in model.state_dict().items()}
saved_moments = [opt.state[p]["exp_avg"].clone() for p in model.parameters()]
with torch.no_grad():
    for p in model.parameters():
        p.add_(1.0)
        opt.state[p]["exp_avg"].zero_()
assert ck.restore(state) == 1
ck.close()
assert all(torch.equal(model.state_dict()[k], v) for k, v in saved.items())
assert all(torch.equal(opt.state[p]["exp_avg"], m) for p, m in zip(model.parameters(), saved_moments))

sd = {"model": model.state_dict()}
# No runtime=: the writer and the reader take the program's Runtime (baton/dcp/runtime.py).
dcp.save(sd, storage_writer=BatonWriter(os.path.join(ckpt_dir, "dcp")))
loaded = {"model": {k: torch.zeros_like(v) for k, v in saved.items()}}
dcp.load(loaded, storage_reader=BatonReader(os.path.join(ckpt_dir, "dcp")))
assert all(torch.equal(loaded["model"][k], v) for k, v in saved.items())
# dcp.async_save: BatonWriter is its own AsyncStager (stage() on this thread copies the state and opens the
# directory's checkpointer; DCP's thread only writes through it), as torch of this environment calls it.
writer = BatonWriter(os.path.join(ckpt_dir, "dcp"))
future = dcp.async_save(sd, storage_writer=writer)
with torch.no_grad():
    for p in model.parameters():
        p.add_(1.0)  # after the call: not in the version
future.result()
writer.close()
loaded = {"model": {k: torch.zeros_like(v) for k, v in saved.items()}}
dcp.load(loaded, storage_reader=BatonReader(os.path.join(ckpt_dir, "dcp")))
assert all(torch.equal(loaded["model"][k], v) for k, v in saved.items()), "async_save"
print(f"rank {rt.rank} of {rt.size}: Checkpointer and dcp round trips equal, torch {torch.__version__}, "
      f"baton {baton.__version__} from {os.path.dirname(baton.__file__)}", flush=True)
# No destroy_process_group(): on torch 2.5.1 it deadlocks in about half the runs here, with
# DCP's own FileSystemWriter/Reader as with baton's: a gloo worker thread
# (ProcessGroupGloo::runLoop) frees a tensor whose Python object needs the GIL, which the
# main thread holds while destroy_process_group waits for that worker (gdb, 2026-12-06);
# the other rank then times out in MPI_Finalize and exits 75. The process group ends with
# the process.
rt.close()
