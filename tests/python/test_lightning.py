"""baton.lightning: a Lightning Trainer (DDP, CPU, gloo) saving and resuming through baton.Checkpointer.

Under mpirun every rank's pytest runs the same Trainers; the process group
comes from baton.init_process_group. Checks: an interrupted run resumed from
an epoch-end checkpoint ends with the same parameters, bit for bit, as an
uninterrupted one; the agreed stop (a SIGTERM on one rank) stops every rank
at the same step, saves that step once, exits 75, and resumes.
"""
import os
import re
import signal

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning.pytorch")
import torch.distributed as dist  # noqa: E402
from lightning.pytorch.callbacks import ModelCheckpoint  # noqa: E402

import baton  # noqa: E402
import baton.lightning as bl  # noqa: E402

SAMPLES, FEATURES, BATCH = 192, 8, 16  # 4 steps per epoch at 3 ranks


class Regression(L.LightningModule):
    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.net = torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.Tanh(), torch.nn.Dropout(0.1),
                                       torch.nn.Linear(16, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=1e-2)
        return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)}

    def train_dataloader(self):
        g = torch.Generator().manual_seed(5)
        x = torch.randn(SAMPLES, FEATURES, generator=g)
        y = torch.sin(x.sum(dim=1, keepdim=True))
        # Lightning adds a DistributedSampler (shuffled from its seed and the epoch).
        return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=BATCH, shuffle=True)


def _trainer(rt, io, stop, root, epochs, extra=()):
    return L.Trainer(accelerator="cpu", devices=rt.local_size, num_nodes=rt.num_nodes, max_epochs=epochs,
                     strategy=bl.DDPStrategy(checkpoint_io=io), plugins=[bl.Environment(rt)],
                     callbacks=[stop, *extra], default_root_dir=root, logger=False, enable_progress_bar=False,
                     enable_model_summary=False, num_sanity_val_steps=0, deterministic=True)


def _params(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


@pytest.fixture
def group(rt):
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        os.environ.pop(k, None)
    torch.set_num_threads(1)
    baton.init_process_group(rt, backend="gloo", timeout=60)
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


def _fit(rt, shared_dir, name, epochs, seed, resume):
    ck = baton.Checkpointer(rt, dir=os.path.join(shared_dir, name, "ckpt"))
    io = bl.CheckpointIO(ck)
    stop = bl.AgreedStop(rt)
    root = os.path.join(shared_dir, name)
    every_epoch = ModelCheckpoint(dirpath=os.path.join(root, "checkpoints"), every_n_epochs=1, save_top_k=-1)
    model = Regression(seed)
    trainer = _trainer(rt, io, stop, root, epochs, [every_epoch])
    baton.init_process_group(rt)  # kept when it exists: Lightning's teardown may have ended it
    path = io.resume_path() if resume else None
    trainer.fit(model, ckpt_path=path)
    ck.close()
    return model, trainer, io, stop, path


def test_resume_is_bit_identical_to_an_uninterrupted_run(rt, group, shared_dir):
    whole, t_whole, _, stop, _ = _fit(rt, shared_dir, "whole", epochs=4, seed=1, resume=False)
    assert stop.exit_code == 0 and t_whole.global_step == 4 * SAMPLES // (BATCH * rt.size)

    _fit(rt, shared_dir, "parts", epochs=2, seed=1, resume=False)
    # Another model's initial weights: everything must come from the checkpoint.
    resumed, t_resumed, io, stop, path = _fit(rt, shared_dir, "parts", epochs=4, seed=99, resume=True)
    assert path == os.path.join(shared_dir, "parts", "ckpt")
    assert stop.exit_code == 0 and t_resumed.global_step == t_whole.global_step
    a, b = _params(whole), _params(resumed)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), f"{k} differs after the resume"
    # ModelCheckpoint(save_top_k=-1) kept a pointer per epoch; those whose versions keep=3 removed are gone
    # with them (issue 47: 4 pointers, one naming a removed version), and each one left names a version held.
    pointers = sorted(os.listdir(os.path.join(shared_dir, "parts", "checkpoints")))
    assert len(pointers) == 3, pointers
    held = sorted(int(n.rsplit("-s", 1)[1]) for n in os.listdir(path) if n.startswith("v"))
    named = sorted(bl._read_pointer(os.path.join(shared_dir, "parts", "checkpoints", p))["step"] for p in pointers)
    assert named == held, (named, held)


def test_a_pointer_to_a_removed_version_names_the_versions_held(rt, group, shared_dir):
    """ModelCheckpoint(save_top_k=-1, save_last=True) over 4 epochs with keep=2: the epoch pointers of removed
    versions are removed with them, last.ckpt stays; a pointer naming a removed version (as one copied away and
    given back as ckpt_path) is refused with NotFound naming the steps the directory holds."""
    ck = baton.Checkpointer(rt, dir=os.path.join(shared_dir, "k2", "ckpt"), keep=2)
    io = bl.CheckpointIO(ck)
    stop = bl.AgreedStop(rt)
    root = os.path.join(shared_dir, "k2")
    pointers_dir = os.path.join(root, "checkpoints")
    every = ModelCheckpoint(dirpath=pointers_dir, every_n_epochs=1, save_top_k=-1, save_last=True)
    baton.init_process_group(rt)
    _trainer(rt, io, stop, root, 4, [every]).fit(Regression(1))
    per_epoch = 4 * SAMPLES // (BATCH * rt.size) // 4
    held = [3 * per_epoch, 4 * per_epoch]
    names = sorted(os.listdir(pointers_dir))
    assert len(names) == 3 and "last.ckpt" in names, names
    assert sorted({bl._read_pointer(os.path.join(pointers_dir, n))["step"] for n in names}) == held, names
    stale = os.path.join(shared_dir, f"stale-{rt.rank}.ckpt")
    bl._write_pointer(stale, {"baton_dir": ck.dir, "step": per_epoch})
    with pytest.raises(baton.NotFound, match=r"names step %d, which .* no longer holds .* holds steps %s" % (
            per_epoch, re.escape(str(held)))):
        io.load_checkpoint(stale)
    assert io.load_checkpoint(os.path.join(pointers_dir, "last.ckpt"))["global_step"] == held[-1]
    ck.close()


class _SignalAt(L.Callback):
    """Sends ``signum`` to this process at the start of global step ``step`` (one rank only)."""

    def __init__(self, step, signum):
        self.step, self.signum = step, signum

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.step:
            os.kill(os.getpid(), self.signum)


def test_sigterm_on_one_rank_is_an_agreed_stop_saved_once(rt, group, shared_dir):
    ck = baton.Checkpointer(rt, dir=os.path.join(shared_dir, "ckpt"))
    io = bl.CheckpointIO(ck)
    stop = bl.AgreedStop(rt)
    every3 = ModelCheckpoint(dirpath=os.path.join(shared_dir, "checkpoints"), every_n_train_steps=3,
                             save_top_k=-1)
    extra = [every3]
    if rt.rank == rt.size - 1:
        extra.insert(0, _SignalAt(5, signal.SIGTERM))  # during the 6th step: the stop lands on step 6
    trainer = _trainer(rt, io, stop, shared_dir, 10, extra)
    trainer.fit(Regression(1))
    steps = [None] * rt.size
    baton.init_process_group(rt)
    dist.all_gather_object(steps, stop.stopped_at)
    assert steps == [6] * rt.size, steps
    assert stop.exit_code == baton.EXIT_REQUEUE
    # ModelCheckpoint saves step 6 too: one baton save of each step (3 and 6).
    assert io.saves == 2
    assert ck.read_metadata()["step"] == 6

    # The requeued run (a new Runtime: a stop, once agreed, stays) resumes at step 6 and finishes.
    ck.close()
    dist.destroy_process_group()
    rt.close()
    with baton.Runtime() as rt2:
        baton.init_process_group(rt2, backend="gloo", timeout=60)
        ck2 = baton.Checkpointer(rt2, dir=os.path.join(shared_dir, "ckpt"))
        io2 = bl.CheckpointIO(ck2)
        stop2 = bl.AgreedStop(rt2)
        trainer2 = _trainer(rt2, io2, stop2, shared_dir, 2)
        trainer2.fit(Regression(2), ckpt_path=io2.resume_path())
        assert stop2.exit_code == 0 and stop2.stopped_at is None
        assert trainer2.global_step == 2 * SAMPLES // (BATCH * rt2.size)
        # The Trainer's default ModelCheckpoint saves each epoch's end after step 6, once
        # (at 3 ranks: step 8; at 1 rank: steps 12 and 24).
        per_epoch = SAMPLES // (BATCH * rt2.size)
        assert io2.saves == len([e for e in (1, 2) if e * per_epoch > 6])
        assert ck2.read_metadata()["step"] == trainer2.global_step
        ck2.close()


def test_bad_pointer_files_are_refused(rt, shared_dir):
    ck = baton.Checkpointer(rt, dir=os.path.join(shared_dir, "ckpt"))
    io = bl.CheckpointIO(ck)
    with pytest.raises(baton.NotFound, match="no such file"):
        io.load_checkpoint(os.path.join(shared_dir, "nothing.ckpt"))
    bad = os.path.join(shared_dir, f"bad-{rt.rank}.ckpt")
    with open(bad, "w") as f:
        f.write('{"step": 3}')
    with pytest.raises(baton.InvalidArgument, match="baton_dir"):
        io.load_checkpoint(bad)
    with pytest.raises(baton.InvalidArgument, match="global_step"):
        io.save_checkpoint({"global_step": -1}, bad)
    assert io.resume_path() is None
    ck.close()
