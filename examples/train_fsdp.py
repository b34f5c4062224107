#!/usr/bin/python3
"""train_fsdp.py: a small transformer under FSDP2 (fully_shard) that survives
node failure, preemption and requeue through baton's Python package.

A two-layer transformer language model (about 1.6 MiB of float32 weights by
default) learns to continue seeded token sequences, with AdamW and a cosine
schedule. fully_shard splits every parameter's dim 0 over the ranks (CPU and
gloo here; CUDA and NCCL where present): the weights and AdamW's moments are
DTensors, each rank holding its rows. The training state is saved through
torch.distributed.checkpoint with baton as its storage (baton.dcp.BatonWriter
/ BatonReader: HDF5 shards with a hash per chunk, the manifest committed by
rename, an older version when the newest fails to verify): DCP's planner
turns the DTensors into chunks, each rank writes its own rows once, and a
load at another world size reads only the chunks its new shards need. The
model and AdamW state come from torch's get_state_dict/set_state_dict; the
scheduler, the data cursor and the world size ride along as DCP's pickled
values, and every rank's RNG state under a key of its own (at another world
size those keys do not fit, and dropout draws anew).

Runs as train_ddp.py does: `srun --baton`, `mpirun -n 2 python3
train_fsdp.py --ckpt-dir DIR`, or train_fsdp.sbatch (`baton run`: a restart
inside the allocation after a node failure, on fewer nodes when its
--min-nodes allows). Each step goes to baton's event log (baton report);
a bug exits 1, a lost peer or a deadline 75 (baton.exit_for).
"""
import argparse
import hashlib
import math
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn

import baton


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=100, help="training steps in all (default 100)")
    p.add_argument("--ckpt-every", type=int, default=10, help="save every this many steps (default 10)")
    p.add_argument("--dim", type=int, default=128, help="the model's width (default 128)")
    p.add_argument("--layers", type=int, default=2, help="transformer layers (default 2)")
    p.add_argument("--vocab", type=int, default=256, help="tokens (default 256)")
    p.add_argument("--seq", type=int, default=32, help="tokens per sample (default 32)")
    p.add_argument("--batch", type=int, default=8, help="samples per rank and step (default 8)")
    p.add_argument("--samples", type=int, default=2048, help="samples in the data set (default 2048)")
    p.add_argument("--lr", type=float, default=3e-3, help="AdamW's peak learning rate (default 3e-3)")
    p.add_argument("--seed", type=int, default=1, help="seed of the data, the weights and dropout (default 1)")
    p.add_argument("--threads", type=int, default=1, help="torch's intra-op threads (default 1)")
    p.add_argument("--stop-at", type=int, default=0,
                   help="act as if a stop were agreed after this step: save, exit 75 (to try a resume; default: off)")
    p.add_argument("--ckpt-dir", default=os.environ.get("BATON_CKPT_DIR"),
                   help="the checkpoint directory, shared by the nodes (default: $BATON_CKPT_DIR)")
    p.add_argument("--step-ms", type=float, default=0,
                   help="sleep this long in every step, so that a test can interrupt the run (default 0)")
    args = p.parse_args()
    if not args.ckpt_dir:
        p.error("no checkpoint directory: give --ckpt-dir DIR or set BATON_CKPT_DIR (sbatch/srun --baton-ckpt-dir)")
    return args


class Cursor:
    """Which samples come next: the epoch and the position in its order (drawn from the seed and the epoch)."""

    def __init__(self, tokens, batch, seed):
        self.tokens, self.batch, self.seed = tokens, batch, seed
        self.epoch, self.pos = 0, 0

    def next_batch(self, rank, world):
        step_samples = self.batch * world
        if self.pos + step_samples > len(self.tokens):
            self.epoch, self.pos = self.epoch + 1, 0
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        idx = torch.randperm(len(self.tokens), generator=g)[self.pos:self.pos + step_samples]
        self.pos += step_samples
        seq = self.tokens[idx[rank::world]]
        return seq[:, :-1], seq[:, 1:]

    def state_dict(self):
        return {"epoch": self.epoch, "pos": self.pos}

    def load_state_dict(self, state):
        self.epoch, self.pos = int(state["epoch"]), int(state["pos"])


def make_tokens(samples, seq, vocab, seed):
    """Seeded sequences with structure to learn: each token a function of the two before it, plus noise."""
    g = torch.Generator().manual_seed(seed)
    t = torch.zeros(samples, seq + 1, dtype=torch.long)
    t[:, :2] = torch.randint(vocab, (samples, 2), generator=g)
    for i in range(2, seq + 1):
        t[:, i] = (t[:, i - 1] * 7 + t[:, i - 2] * 3 + 1) % vocab
    noise = torch.rand(samples, seq + 1, generator=g) < 0.05
    t[noise] = torch.randint(vocab, (int(noise.sum()),), generator=g)
    return t


class LM(nn.Module):
    def __init__(self, vocab, dim, layers, seq):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(seq, dim) * 0.02)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(dim, nhead=4, dim_feedforward=4 * dim, dropout=0.1, batch_first=True)
            for _ in range(layers))
        self.head = nn.Linear(dim, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

    def forward(self, x):
        h = self.embed(x) + self.pos[:x.shape[1]]
        for b in self.blocks:
            h = b(h, src_mask=self.mask[:x.shape[1], :x.shape[1]], is_causal=True)
        return self.head(h)


def checksum(model):
    """SHA-256 of the full weights (gathered from the shards: collective), as hex."""
    h = hashlib.sha256()
    for name, p in model.state_dict().items():
        t = p.full_tensor() if hasattr(p, "full_tensor") else p
        t = t.detach().cpu().contiguous()
        h.update(f"{name} {t.dtype} {tuple(t.shape)}\n".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    from torch.distributed.fsdp import fully_shard

    rt = baton.Runtime()
    rank, world = rt.rank, rt.size
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(rt.local_rank)
    baton.init_process_group(rt, backend="nccl" if cuda else "gloo",
                             timeout=int(os.environ.get("BATON_COLLECTIVE_TIMEOUT", 600)))

    def say(msg):
        if rank == 0:
            print(msg, flush=True)

    torch.manual_seed(args.seed)  # the same initial weights on every rank, before sharding
    model = LM(args.vocab, args.dim, args.layers, args.seq)
    if cuda:
        model = model.cuda()
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warmup = max(1, args.steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, args.steps) / args.steps)))
    tokens = make_tokens(args.samples, args.seq, args.vocab, args.seed)
    if args.batch * world > args.samples:
        sys.exit(f"train_fsdp.py: --batch {args.batch} x {world} ranks is more than the {args.samples} samples")
    loader = Cursor(tokens, args.batch, args.seed)
    torch.manual_seed(args.seed * 7919 + 1 + rank)  # each rank's own dropout stream

    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from baton.dcp import BatonReader, BatonWriter

    rng_key = f"rng_rank{rank}"

    def app_state():
        msd, osd = get_state_dict(model, opt)
        return {"model": msd, "optim": osd, "sched": sched.state_dict(), "loader": loader.state_dict(),
                "world": world, rng_key: torch.get_rng_state()}

    def save(done):
        dcp.save(app_state(), storage_writer=BatonWriter(args.ckpt_dir, step=done, runtime=rt))

    def restore():
        """The newest version every rank can read and verify, or None when the directory holds none."""
        ck = baton.ArrayCheckpointer(rt, dir=args.ckpt_dir)  # collective: every rank asks
        try:
            if ck.read_metadata() is None:
                return None
        finally:
            ck.close()
        sd = app_state()
        reader = BatonReader(args.ckpt_dir, runtime=rt)
        # allow_partial_load: at another world size this rank's RNG key may not be in the checkpoint.
        dcp.load(sd, storage_reader=reader, planner=DefaultLoadPlanner(allow_partial_load=True))
        set_state_dict(model, opt, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
        sched.load_state_dict(sd["sched"])
        loader.load_state_dict(sd["loader"])
        if int(sd["world"]) == world:
            torch.set_rng_state(sd[rng_key])
        return reader.last_restore["step"]

    step = restore()
    restart = os.environ.get("SLURM_RESTART_COUNT", "0")
    say(f"no checkpoint in {args.ckpt_dir}: starting at step 1 (restart {restart}, {world} ranks)" if step is None
        else f"resumed from step {step} (restart {restart}, {world} ranks)")

    device = torch.device("cuda", rt.local_rank) if cuda else torch.device("cpu")
    for step in range(step or 0, args.steps):
        t0 = time.monotonic()
        rt.begin_step(step + 1)
        x, y = loader.next_batch(rank, world)
        x, y = x.to(device), y.to(device)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()  # FSDP reduce-scatters the gradients to their shards
        opt.step()
        sched.step()
        if args.step_ms > 0:
            time.sleep(args.step_ms / 1000)
        done = step + 1
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        mean = mean.item() / world
        rt.end_step(mean)
        say(f"step={done} loss={mean:.6f} lr={sched.get_last_lr()[0]:.6f} epoch={loader.epoch} pos={loader.pos} "
            f"ms={(time.monotonic() - t0) * 1e3:.1f} time={time.time():.3f}")
        saved = False
        if done % args.ckpt_every == 0 or done == args.steps:
            save(done)
            saved = True
            say(f"checkpoint step={done}")
        if (rt.should_stop() or done == args.stop_at) and done < args.steps:
            if not saved:
                save(done)
            say(f"stop agreed at step {done}: checkpoint saved, exiting {baton.EXIT_REQUEUE} to be requeued")
            dist.destroy_process_group()
            sys.exit(baton.EXIT_REQUEUE)

    digest = checksum(model)
    dist.destroy_process_group()
    say(f"final_checksum={digest}")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001  (a bug exits 1 at once; a lost peer or a deadline 75)
        baton.exit_for(e, "train_fsdp.py")
