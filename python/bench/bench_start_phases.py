"""Where a Python rank's start goes: the part of a relaunch between srun and the first step.

    T_LAUNCH=$(date +%s.%N) PYTHONPATH=_build/python GLOO_SOCKET_IFNAME=lo \
        tests/lib/mpirun-ranks 2 /opt/baton-venv/bin/python python/bench/bench_start_phases.py --wrap ddp|fsdp2

scripts/bench-recovery puts 6-6.5 s of a spare's recovery between srun and the
Runtime's start record, without splitting it. This splits it in the order
examples/train_ddp.py and train_fsdp.py do it: the interpreter's start (from
T_LAUNCH, the launcher's clock, when given), `import torch` (with torch.nn),
torch.use_deterministic_algorithms(True) (the examples call it first; it
imports torch._inductor and with it torch._dynamo), FSDP2's fully_shard
import (--wrap fsdp2: train_fsdp.py imports it before the Runtime), `import
baton`, baton.Runtime() (MPI_Init and baton's set-up), baton.init_process_group
(gloo), the model's wrap (DDP or FSDP2's fully_shard, with what they import on
first use), and a first all-reduce of the gradients' size. Each rank prints
one line of wall seconds and the OMPI_MCA_mtl that MPI_Init saw
(OMPI_MCA_mtl=^ofi in the environment measures MPI_Init as it was before
baton left PSM out, mpi_runtime/open_mpi_mtl.h); run it a few times and
compare within a run only (the machine is shared). --no-deterministic leaves
the deterministic call out, as the bench did before 2026-12-06 (the wrap then
pays for torch._dynamo). What is torch's and what is baton's is what each
line says.
"""

import argparse
import os
import time

T_PROCESS = time.time()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--wrap", choices=("ddp", "fsdp2"), default="ddp")
    p.add_argument("--no-deterministic", action="store_true",
                   help="leave out torch.use_deterministic_algorithms(True) (the examples call it)")
    args = p.parse_args()
    launched = float(os.environ["T_LAUNCH"]) if os.environ.get("T_LAUNCH") else None
    marks = [("interpreter", T_PROCESS)]

    import torch
    import torch.distributed as dist
    from torch import nn
    marks.append(("import torch", time.time()))
    if not args.no_deterministic:
        torch.use_deterministic_algorithms(True)
        marks.append(("use_deterministic_algorithms", time.time()))
    if args.wrap == "fsdp2":
        try:
            from torch.distributed.fsdp import fully_shard
        except ImportError:  # torch < 2.6
            from torch.distributed._composable.fsdp import fully_shard
        marks.append(("import fully_shard", time.time()))
    import baton
    marks.append(("import baton", time.time()))
    rt = baton.Runtime()
    marks.append(("Runtime (MPI_Init)", time.time()))
    baton.init_process_group(rt, backend="gloo")
    marks.append(("init_process_group", time.time()))
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256))
    if args.wrap == "ddp":
        from torch.nn.parallel import DistributedDataParallel
        model = DistributedDataParallel(model)
    else:
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        fully_shard(model)
    marks.append(("wrap (%s)" % args.wrap, time.time()))
    grad = torch.ones(256 * 256 * 2)
    dist.all_reduce(grad)
    marks.append(("first all_reduce", time.time()))

    parts = []
    if launched is not None:
        parts.append("launch->interpreter %.2f" % (T_PROCESS - launched))
    parts += ["%s %.2f" % (name, t - marks[i][1]) for i, (name, t) in enumerate(marks[1:])]
    total = marks[-1][1] - (launched if launched is not None else T_PROCESS)
    import ctypes
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    mtl = libc.getenv(b"OMPI_MCA_mtl")  # as MPI_Init read it (os.environ is the start's copy)
    print("rank %d: %s; total %.2f s (OMPI_MCA_mtl=%s)" % (rt.rank, ", ".join(parts), total,
                                                          mtl.decode() if mtl else "unset"), flush=True)
    dist.destroy_process_group()
    rt.close()


if __name__ == "__main__":
    main()
