#!/usr/bin/python3
"""train_ddp.py: PyTorch DistributedDataParallel training that survives node
failure, preemption and requeue through baton's Python package.

A small MLP (dropout included, so the RNG state matters) learns a seeded
synthetic regression with Adam. Each rank takes its part of every global
batch from a data cursor. The whole training state is one state dict given
to baton.Checkpointer: the model, the optimizer (Adam's moments), the
cursor and every rank's RNG state. A checkpoint is saved every --ckpt-every
steps; when the ranks agree to stop (SIGTERM from a preemption or
`scontrol requeue`, the time-limit signal), they save and exit 75 so that
Slurm runs the job again, and the new run resumes where the saved one was.

Run it with examples/train_ddp.sbatch (`baton run`), which also says where
GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME go, with `srun --baton`, or under
`mpirun -n 3 python3 train_ddp.py --ckpt-dir DIR`: baton.init_process_group
takes the rank and size from baton's Runtime and the meeting point from the
plugin's MASTER_ADDR/MASTER_PORT, or agrees one over MPI. The checkpoint
directory: --ckpt-dir, else $BATON_CKPT_DIR (`sbatch --baton-ckpt-dir=DIR`
or `srun --baton-ckpt-dir=DIR` sets it). --step-ms sleeps in every step, so
that a test (or a demo) has time to kill a node in the middle of a run.

Each step is recorded in baton's event log (rt.begin_step(n) before step n,
rt.end_step(loss) after it, n counting from 1 as baton-train's steps do), so
that `baton report DIR` gives the job's goodput and what each interruption
cost. How it ends: 0 when done; 75 (requeue me) after an agreed stop, or
when a peer was lost or a deadline passed (baton.requeue_cures: gloo's
"Connection closed by peer", baton's TimeoutError); 1 for a bug or bad
input (a Python exception, baton.InvalidArgument): a new run would fail
the same way, so `baton run` neither relaunches nor requeues it.

Determinism: a run interrupted by a node failure, requeued and resumed ends
with the same weights, bit for bit, as a run never interrupted, at the same
world size (the final checksum says so; tests/cluster/test_torch.sh checks
it). What that takes:
  - every input of a step is in the checkpoint: weights, Adam's state, the
    cursor (the order of an epoch is a permutation drawn from the seed and
    the epoch number, so the cursor is two integers) and the dropout RNG;
  - the gradient sum adds the ranks' values in the same order every run:
    gloo's all-reduce does for a given world size and bucket layout, and
    find_unused_parameters=True keeps DDP's first bucket layout (otherwise
    DDP rebuilds its buckets after a run's first step, so a resumed run's
    first step would reduce in another layout than the same step of the
    uninterrupted run, and the sums round differently: measured, the
    checksums differed). torch 1.13 then warns once per rank that it found
    no unused parameters; the flag is kept for its bucket layout;
  - one intra-op thread (--threads): a matrix product's rounding can depend
    on how many threads split it.
With NCCL on GPUs the same holds only where NCCL's reduction order is fixed
(NCCL_ALGO=Ring, the same GPUs); the example does not claim it there.
"""
import argparse
import hashlib
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import baton


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=200, help="training steps in all (default 200)")
    p.add_argument("--ckpt-every", type=int, default=20, help="save every this many steps (default 20)")
    p.add_argument("--hidden", type=int, default=64, help="width of the hidden layers (default 64)")
    p.add_argument("--features", type=int, default=16, help="inputs per sample (default 16)")
    p.add_argument("--samples", type=int, default=4096, help="samples in the data set (default 4096)")
    p.add_argument("--batch", type=int, default=32, help="samples per rank and step (default 32)")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate (default 1e-3)")
    p.add_argument("--seed", type=int, default=1, help="seed of the data set, the weights and dropout (default 1)")
    p.add_argument("--threads", type=int, default=1, help="torch's intra-op threads (default 1; see the top)")
    p.add_argument("--ckpt-dir", default=os.environ.get("BATON_CKPT_DIR"),
                   help="the checkpoint directory, shared by the nodes (default: $BATON_CKPT_DIR)")
    p.add_argument("--inject", default=None, metavar="KIND@STEP",
                   help="for tests: at step STEP the last rank fails: 'bug' raises a Python error (exit 1, "
                        "not relaunched), 'die' kills itself (its peers see a lost peer: exit 75)")
    p.add_argument("--step-ms", type=float, default=0,
                   help="sleep this long in every step, so that a test can interrupt the run (default 0)")
    args = p.parse_args()
    if args.inject:
        kind, _, at = args.inject.partition("@")
        if kind not in ("bug", "die") or not at.isdigit():
            p.error(f"--inject {args.inject!r}: give bug@STEP or die@STEP")  # exit 2
        args.inject = (kind, int(at))
    return args


class Cursor:
    """The data cursor: which samples come next, for every rank.

    Its state is the epoch and the position in that epoch's order, the same
    on every rank (job-wide metadata in the checkpoint). Each epoch's order
    is a permutation drawn from (seed, epoch), so nothing else is needed to
    continue where a saved run was.
    """

    def __init__(self, x, y, batch, rank, world, seed):
        self.x, self.y = x, y
        self.batch, self.rank, self.world, self.seed = batch, rank, world, seed
        self.epoch, self.pos = 0, 0
        self._order_epoch, self._order = None, None

    def _order_of(self, epoch):
        if self._order_epoch != epoch:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._order, self._order_epoch = torch.randperm(len(self.x), generator=g), epoch
        return self._order

    def next_batch(self):
        step_samples = self.batch * self.world
        if self.pos + step_samples > len(self.x):
            self.epoch, self.pos = self.epoch + 1, 0
        idx = self._order_of(self.epoch)[self.pos:self.pos + step_samples]
        self.pos += step_samples
        mine = idx[self.rank::self.world]
        return self.x[mine], self.y[mine]

    def state_dict(self):
        return {"epoch": self.epoch, "pos": self.pos}

    def load_state_dict(self, state):
        self.epoch, self.pos = int(state["epoch"]), int(state["pos"])


def make_data(samples, features, seed):
    """A seeded regression: y = sin(x . w) + 0.1 noise; the same on every rank."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, features, generator=g)
    w = torch.randn(features, 1, generator=g) / features ** 0.5
    y = torch.sin(x @ w) + 0.1 * torch.randn(samples, 1, generator=g)
    return x, y


def make_model(features, hidden, seed):
    torch.manual_seed(seed)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    return nn.Sequential(nn.Linear(features, hidden), nn.Tanh(), nn.Dropout(0.1),
                         nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1))


def checksum(model):
    """SHA-256 of the weights (names, dtypes, shapes and bytes), as hex."""
    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        t = t.detach().cpu().contiguous()
        h.update(f"{name} {t.dtype} {tuple(t.shape)}\n".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)

    rt = baton.Runtime()  # MPI (for baton's checkpoints and the agreed stop) beside torch.distributed
    rank, world = rt.rank, rt.size

    def say(msg):  # rank 0 speaks for all; flushed, so a killed run's output ends where it ended
        if rank == 0:
            print(msg, flush=True)

    cuda = torch.cuda.is_available()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    # The group from baton's Runtime: srun --baton's variables, else an
    # address agreed over MPI (mpirun); its timeout is every collective's.
    baton.init_process_group(rt, backend="nccl" if cuda else "gloo",
                             timeout=int(os.environ.get("BATON_COLLECTIVE_TIMEOUT", 600)))

    inject = args.inject

    x, y = make_data(args.samples, args.features, args.seed)
    if args.batch * world > args.samples:
        sys.exit(f"train_ddp.py: --batch {args.batch} x {world} ranks is more than the {args.samples} samples")
    x, y = x.to(device), y.to(device)
    model = make_model(args.features, args.hidden, args.seed).to(device)
    ddp = DistributedDataParallel(model, find_unused_parameters=True)  # see the top: fixed buckets
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    loader = Cursor(x, y, args.batch, rank, world, args.seed)
    torch.manual_seed(args.seed * 7919 + 1 + rank)  # each rank's own dropout stream

    # The whole training state. Tensors every rank holds (weights, Adam's
    # moments) are saved once in total, spread over the ranks; the cursor and
    # param_groups are job-wide metadata; RNGState is each rank's own.
    if not args.ckpt_dir:
        print("train_ddp.py: no checkpoint directory: give --ckpt-dir DIR or set BATON_CKPT_DIR "
              "(sbatch/srun --baton-ckpt-dir=DIR)", file=sys.stderr, flush=True)
        sys.exit(2)
    ck = baton.Checkpointer(rt, dir=args.ckpt_dir)
    state = {"model": model, "optim": opt, "loader": loader, "rng": baton.RNGState()}
    # In place; None on a first run. At another world size (a restart on
    # fewer nodes: baton run --min-nodes) the weights, Adam's state and the
    # cursor are restored; the per-rank dropout streams are not (they do not
    # fit the new ranks: baton warns naming 'rng') and go on from this run's
    # seeds. drop_rank_state_on_resize=False would refuse instead (exit 75).
    step = ck.restore(state)
    restart = os.environ.get("SLURM_RESTART_COUNT", "0")
    if step is None:
        say(f"no checkpoint in {args.ckpt_dir}: starting at step 1 (restart {restart})")
    else:
        say(f"resumed from step {step} (restart {restart})")

    # baton's step is the number of steps completed: save(state, step + 1)
    # once step `step` is done, and restore gives back the first step to run.
    loss_fn = nn.MSELoss()
    for step in range(step or 0, args.steps):
        t0 = time.monotonic()
        rt.begin_step(step + 1)  # the event log's step n is the n-th step (baton-train's numbering)
        if inject and inject[1] == step + 1 and rank == world - 1:
            if inject[0] == "bug":
                raise ZeroDivisionError(f"--inject bug@{step + 1}: a bug in the training step")
            os.kill(os.getpid(), signal.SIGKILL)  # the peers are in the step's all-reduce: gloo sees it
        xb, yb = loader.next_batch()
        opt.zero_grad()
        loss = loss_fn(ddp(xb), yb)
        loss.backward()  # DDP averages the gradients over the ranks
        opt.step()
        if args.step_ms > 0:
            time.sleep(args.step_ms / 1000)
        done = step + 1
        rt.end_step(loss.item())
        say(f"step={done} loss={loss.item():.6f} epoch={loader.epoch} pos={loader.pos} "
            f"ms={(time.monotonic() - t0) * 1e3:.1f} time={time.time():.3f}")
        saved = False
        if done % args.ckpt_every == 0 or done == args.steps:
            ck.save(state, done)
            saved = True
            say(f"checkpoint step={done}")
        # Collective: true on every rank at the same step once any rank was
        # asked to stop (SIGTERM, the time-limit signal).
        if rt.should_stop() and done < args.steps:
            if not saved:
                ck.save(state, done)
            say(f"stop agreed at step {done}: checkpoint saved, exiting {baton.EXIT_REQUEUE} to be requeued")
            dist.destroy_process_group()
            sys.exit(baton.EXIT_REQUEUE)

    # Every rank checks that all hold the same weights, then prints their checksum.
    mine = checksum(model)
    digests = [None] * world
    dist.all_gather_object(digests, mine)
    dist.destroy_process_group()
    if any(d != mine for d in digests):
        print(f"train_ddp.py: rank {rank}'s weights ({mine}) differ from another rank's ({digests})",
              file=sys.stderr, flush=True)
        sys.exit(1)
    print(f"final_checksum={mine}", flush=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001  (every failure is named and given its exit status)
        # A lost peer (gloo's "Connection closed by peer"), a deadline, I/O:
        # exit 75, a new launch may succeed. A bug or bad input: raised again
        # for baton's excepthook: exit 1 on every rank at once, recorded as
        # uncaught (`baton run` neither relaunches nor requeues it).
        baton.exit_for(e, "train_ddp.py")
