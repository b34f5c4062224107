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


def _same(got, want, path="checkpoint", exact=True):
    """``got`` holds what ``want`` holds: the same keys (int optimizer ids stay ints), values, tensors bit for
    bit; ``exact``: the same container types and key order too (an OrderedDict stays one)."""
    if exact:
        assert type(got) is type(want), (path, type(got), type(want))
    if isinstance(want, dict):
        assert isinstance(got, dict), (path, type(got))
        keys = list if exact else (lambda d: sorted(map(repr, d)))
        assert keys(got) == keys(want), (path, list(got), list(want))
        for k in want:
            _same(got[k], want[k], f"{path}[{k!r}]", exact)
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), (path, got)
        for i, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{path}[{i}]", exact)
    elif isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), (path, type(got))
        assert got.dtype == want.dtype and got.shape == want.shape, (path, got.dtype, got.shape)
        assert torch.equal(got.reshape(-1).view(torch.uint8), want.reshape(-1).view(torch.uint8)), path
    else:
        assert type(got) is type(want) and got == want, (path, got, want)


def _without_empty(value):
    """``value`` as DCP's flattening keeps it: dicts and lists without their empty dicts and lists."""
    if isinstance(value, dict):
        out = {k: _without_empty(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if not (isinstance(v, (dict, list)) and not v)}
    if isinstance(value, list):
        return [_without_empty(v) for v in value]
    return value


def test_checkpoint_io_reads_what_the_other_writers_wrote(rt, group, shared_dir):
    """Issue 46 item 1: a Lightning .ckpt file (torch.save of Lightning's checkpoint dict, written by Lightning's
    own CheckpointIO) converted with `baton ckpt import`, and the same dict saved by dcp.save with a BatonWriter:
    baton's CheckpointIO loads each as the dict the file held, tensors bit for bit; a Trainer resumes from the
    imported version. Before, load_checkpoint restored {"lightning", "rng"} only: "in the checkpoint, not in
    the state" for every key of such a version."""
    import subprocess

    from torch.distributed.checkpoint import save as dcp_save

    from baton.dcp import BatonWriter

    cli = os.path.join(os.environ.get("BATON_BUILD_DIR", ""), "cli", "baton")
    if not os.path.exists(cli):
        pytest.skip("the baton command is not built")
    per_epoch = SAMPLES // (BATCH * rt.size)
    ckpt_file = os.path.join(shared_dir, "lightning.ckpt")
    # Lightning's own DDPStrategy and CheckpointIO: rank 0 torch.saves the dict.
    trainer = L.Trainer(accelerator="cpu", devices=rt.local_size, num_nodes=rt.num_nodes, max_epochs=1,
                        strategy=L.strategies.DDPStrategy(), plugins=[bl.Environment(rt)],
                        default_root_dir=shared_dir, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0, enable_checkpointing=False)
    trainer.fit(Regression(1))
    baton.init_process_group(rt)
    trainer.save_checkpoint(ckpt_file)
    dist.barrier()
    want = torch.load(ckpt_file, map_location="cpu", weights_only=True)
    assert want["global_step"] == per_epoch and want["optimizer_states"][0]["state"], sorted(want)

    imported, saved = os.path.join(shared_dir, "imported"), os.path.join(shared_dir, "dcp")
    if rt.rank == 0:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_", "OPAL_"))}
        p = subprocess.run([cli, "ckpt", "import", ckpt_file, imported, "--step", str(per_epoch)],
                           capture_output=True, text=True, env=env, timeout=240)
        assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    dist.barrier()
    dcp_save(want, storage_writer=BatonWriter(saved, step=per_epoch, runtime=rt))
    # The import keeps the file's own structure (exactly the object it held); dcp.save keeps keys and values,
    # but DCP's flattening drops empty containers (Lightning's "callbacks" without any: {}).
    for d, exact in ((imported, True), (saved, False)):
        with baton.Checkpointer(rt, dir=d) as ck:
            io = bl.CheckpointIO(ck)
            _same(io.load_checkpoint(d), want if exact else _without_empty(want), d, exact)
            # Its own versions still read back (the same directory, the next step).
            own = dict(want, global_step=per_epoch + 1)
            io.save_checkpoint(own, os.path.join(shared_dir, f"own-{os.path.basename(d)}.ckpt"))
            _same(io.load_checkpoint(d), own, d, exact)

    # Trainer.fit(ckpt_path=) from the imported version, another model's initial weights: it goes on from the
    # file's step with the file's weights (max_epochs=1: nothing left to train) and trains the next epoch.
    with baton.Checkpointer(rt, dir=imported) as ck:
        io = bl.CheckpointIO(ck)
        model = Regression(99)
        pointer = os.path.join(shared_dir, "imported.ckpt")
        if rt.rank == 0:
            bl._write_pointer(pointer, {"baton_dir": imported, "step": per_epoch})
        dist.barrier()
        t = _trainer(rt, io, bl.AgreedStop(rt), shared_dir, 1)
        t.fit(model, ckpt_path=pointer)
        assert t.global_step == per_epoch
        for k, v in want["state_dict"].items():
            assert torch.equal(model.state_dict()[k], v), k
        baton.init_process_group(rt)
        t = _trainer(rt, io, bl.AgreedStop(rt), shared_dir, 2)
        t.fit(model, ckpt_path=pointer)
        assert t.global_step == 2 * per_epoch and ck.read_metadata()["step"] == 2 * per_epoch
