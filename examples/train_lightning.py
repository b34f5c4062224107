#!/usr/bin/python3
"""train_lightning.py: a PyTorch Lightning Trainer (DDP) that survives node
failure, preemption and requeue through baton (baton.lightning).

A small MLP (dropout included) learns a seeded synthetic regression with
AdamW and a StepLR schedule. baton.lightning gives the Trainer:
  - the ranks of baton's Runtime (bl.Environment: Lightning starts no
    process; srun or mpirun did) and the process group of
    baton.init_process_group (srun --baton's variables, else agreed over MPI);
  - checkpoints through baton.Checkpointer (bl.CheckpointIO with
    bl.DDPStrategy: every rank writes its share, atomically committed,
    verified; ModelCheckpoint keeps small pointer files);
  - baton's agreed stop instead of Lightning's SLURM auto-requeue
    (bl.AgreedStop): a SIGTERM or the time-limit signal on any rank stops
    every rank at the same step, saved once; the program exits 75 and Slurm
    requeues it, once. Each step goes to baton's event log (baton report).

Runs: `srun --baton python3 train_lightning.py --ckpt-dir DIR`, `mpirun -n 2
python3 train_lightning.py --ckpt-dir DIR`, or train_lightning.sbatch. Run
again with the same directory, it resumes from the newest version.

Bit for bit: a run resumed from an epoch-end checkpoint ends with the same
parameters as an uninterrupted run at the same world size (the final
checksum says so; tests/python/examples-mpirun.sh checks it at 2 ranks,
tests/cluster/test_torch.sh at 3 after a node failure). At 3 ranks and more
that takes DDP's first bucket layout kept (find_unused_parameters=True, as in
train_ddp.py): otherwise DDP rebuilds its buckets after a launch's first
step, the resumed launch's first step sums the ranks' gradients in another
layout than the uninterrupted run's same step, and three addends round
differently (measured: the losses equal to 6 digits, the checksums not; two
addends sum the same in any order). A resume from a
mid-epoch save (the agreed stop, a node failure after --every-n-steps) is
not: Lightning runs the epoch's remaining number of batches but draws them
from the epoch's start, unless the DataLoader is stateful.
"""
import argparse
import hashlib
import os
import sys
import time

import torch
import lightning.pytorch as L
from lightning.pytorch.callbacks import Callback, ModelCheckpoint

import baton
import baton.lightning as bl


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=4, help="epochs in all (default 4)")
    p.add_argument("--samples", type=int, default=1024, help="samples in the data set (default 1024)")
    p.add_argument("--batch", type=int, default=32, help="samples per rank and step (default 32)")
    p.add_argument("--hidden", type=int, default=64, help="width of the hidden layer (default 64)")
    p.add_argument("--every-n-steps", type=int, default=0,
                   help="also save every this many steps (default 0: at each epoch's end only)")
    p.add_argument("--seed", type=int, default=1, help="seed of the data and the weights (default 1)")
    p.add_argument("--threads", type=int, default=1, help="torch's intra-op threads (default 1)")
    p.add_argument("--ckpt-dir", default=os.environ.get("BATON_CKPT_DIR"),
                   help="the checkpoint directory, shared by the nodes (default: $BATON_CKPT_DIR)")
    p.add_argument("--step-ms", type=float, default=0,
                   help="sleep this long in every step, so that a test can interrupt the run (default 0)")
    args = p.parse_args()
    if not args.ckpt_dir:
        p.error("no checkpoint directory: give --ckpt-dir DIR or set BATON_CKPT_DIR (sbatch/srun --baton-ckpt-dir)")
    return args


class Regression(L.LightningModule):
    def __init__(self, features, hidden, seed, step_ms):
        super().__init__()
        torch.manual_seed(seed)
        self.net = torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.Tanh(), torch.nn.Dropout(0.1),
                                       torch.nn.Linear(hidden, 1))
        self.step_ms = step_ms

    def training_step(self, batch, batch_idx):
        x, y = batch
        if self.step_ms > 0:
            time.sleep(self.step_ms / 1000)
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=1e-2)
        return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.7)}


class Progress(Callback):
    """Rank 0's line per step and the step a resumed launch starts from, as the other examples print them
    ("resumed from step N (restart R, W ranks)", "step=N loss=L epoch=E ms=D time=T"): a job's output shows
    where it is, and tests/cluster/test_torch.sh reads it. The loss is rank 0's own batch's."""

    def __init__(self, rt, resumed):
        super().__init__()
        self.rt, self.resumed, self.t0 = rt, resumed, 0.0

    def on_train_start(self, trainer, pl_module):
        if self.resumed and self.rt.rank == 0:
            print(f"resumed from step {trainer.global_step} (restart {os.environ.get('SLURM_RESTART_COUNT', '0')}, "
                  f"{self.rt.size} ranks)", flush=True)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.t0 = time.monotonic()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self.rt.rank == 0:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            print(f"step={trainer.global_step} loss={float(loss):.6f} epoch={trainer.current_epoch} "
                  f"ms={(time.monotonic() - self.t0) * 1e3:.1f} time={time.time():.3f}", flush=True)


def make_data(samples, features, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, features, generator=g)
    w = torch.randn(features, 1, generator=g) / features ** 0.5
    return torch.utils.data.TensorDataset(x, torch.sin(x @ w) + 0.1 * torch.randn(samples, 1, generator=g))


def checksum(module):
    h = hashlib.sha256()
    for name, t in module.state_dict().items():
        t = t.detach().cpu().contiguous()
        h.update(f"{name} {t.dtype} {tuple(t.shape)}\n".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    rt = baton.Runtime()
    baton.init_process_group(rt, backend="gloo", timeout=int(os.environ.get("BATON_COLLECTIVE_TIMEOUT", 600)))
    ck = baton.Checkpointer(rt, dir=args.ckpt_dir)
    io = bl.CheckpointIO(ck)
    stop = bl.AgreedStop(rt)
    root = os.path.join(args.ckpt_dir, "lightning")  # ModelCheckpoint's pointers, beside baton's versions
    saves = [ModelCheckpoint(dirpath=os.path.join(root, "checkpoints"), every_n_epochs=1, save_top_k=-1)]
    if args.every_n_steps > 0:
        saves.append(ModelCheckpoint(dirpath=os.path.join(root, "checkpoints"), every_n_train_steps=args.every_n_steps,
                                     save_top_k=-1, filename="{epoch}-{step}-mid"))
    resume = io.resume_path()
    trainer = L.Trainer(accelerator="cpu", devices=rt.local_size, num_nodes=rt.num_nodes, max_epochs=args.epochs,
                        # find_unused_parameters: DDP's buckets fixed (see the top)
                        strategy=bl.DDPStrategy(checkpoint_io=io, find_unused_parameters=True),
                        plugins=[bl.Environment(rt)],
                        callbacks=[stop, *saves, Progress(rt, resume is not None)], default_root_dir=root,
                        logger=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0, deterministic=True)
    model = Regression(16, args.hidden, args.seed, args.step_ms)
    data = torch.utils.data.DataLoader(make_data(args.samples, 16, args.seed), batch_size=args.batch, shuffle=True)
    if rt.rank == 0:
        restart = os.environ.get("SLURM_RESTART_COUNT", "0")
        print(f"resuming from {resume} (restart {restart})" if resume else
              f"no checkpoint in {args.ckpt_dir}: starting (restart {restart})", flush=True)
    trainer.fit(model, data, ckpt_path=resume)
    if stop.exit_code:
        if rt.rank == 0:
            print(f"stop agreed at step {stop.stopped_at}: checkpoint saved, exiting {stop.exit_code} to be requeued",
                  flush=True)
        sys.exit(stop.exit_code)
    print(f"step={trainer.global_step} final_checksum={checksum(model)}", flush=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001  (a bug exits 1 at once; a lost peer or a deadline 75)
        baton.exit_for(e, "train_lightning.py")
