"""baton for PyTorch Lightning: checkpoints through baton.Checkpointer, the agreed stop, exit 75.

    import baton, baton.lightning as bl
    rt = baton.Runtime()
    baton.init_process_group(rt)                  # before the Trainer: Lightning keeps the group
    io = bl.CheckpointIO(baton.Checkpointer(rt))  # $BATON_CKPT_DIR
    stop = bl.AgreedStop(rt)
    trainer = L.Trainer(accelerator="cpu", devices=rt.local_size, num_nodes=rt.num_nodes,
                        strategy=bl.DDPStrategy(checkpoint_io=io), plugins=[bl.Environment(rt)],
                        callbacks=[stop, ModelCheckpoint(every_n_epochs=1)])
    trainer.fit(model, ckpt_path=io.resume_path())   # None on a first run
    sys.exit(stop.exit_code)                      # 75 after an agreed stop: requeue me

The pieces are thin: the work is the same Checkpointer's as in a plain loop.

* ``CheckpointIO`` is Lightning's three methods on a path. A save hands
  Lightning's whole checkpoint dict (weights, optimizer and scheduler
  state, loops, callbacks) and this rank's ``baton.RNGState`` to
  ``Checkpointer.save`` as version ``global_step`` (collective: atomic,
  verified, levels), then rank 0 writes a small JSON pointer at Lightning's
  path (``{"baton_dir": ..., "step": N}``) so that ModelCheckpoint's
  bookkeeping keeps working. A load reads the pointer (or takes the newest
  version when given the checkpoint directory itself: ``resume_path()``)
  and restores with the Checkpointer's fallback; the tensors are allocated
  from the checkpoint's own metadata. Any writer's version of Lightning's
  checkpoint dict loads so, not only this CheckpointIO's: a ``.ckpt`` file
  converted with ``baton ckpt import`` (the object the file held) or a
  dict saved by ``dcp.save``/``dcp.async_save`` with a ``BatonWriter``.
  ``remove_checkpoint`` removes the pointer only: baton's ``keep=`` decides which versions stay, and after
  each save rank 0 removes the pointers (in the directory of the one it
  wrote) whose versions ``keep=`` removed, so that ModelCheckpoint's
  ``save_top_k``/``save_last`` files never name a version that is gone; a
  pointer to a removed version given as ``ckpt_path`` is refused with the
  steps the directory holds.
* ``DDPStrategy`` is Lightning's, except that every rank takes part in a
  save (Lightning's calls the CheckpointIO on rank 0 only; baton's save is
  collective and writes each rank's share).
* ``Environment`` tells Lightning the ranks are the Runtime's and that the
  processes were started outside (srun, mpirun): Lightning starts none and
  registers no SLURM auto-requeue.
* ``AgreedStop`` replaces Lightning's SLURM auto-requeue (SIGUSR1: a save
  from inside the signal handler on each rank and ``scontrol requeue``)
  with baton's: a SIGTERM or the stop signal (SIGUSR2, ``sbatch
  --signal=B:USR2@120``) on any rank becomes, at the end of a batch, the
  same decision on every rank (``Runtime.should_stop``); the step is saved
  once (not again when a ModelCheckpoint saves the same step) and the
  Trainer stops; the program exits 75 and Slurm (RequeueExit=75) requeues
  the job, once. It also writes each step to baton's event log
  (``begin_step``/``end_step`` with the loss) so that ``baton report``
  covers the job.

Not bit-identical across a resume, as Lightning stands: a mid-epoch
checkpoint (the agreed stop, ``every_n_train_steps``) runs the epoch's
remaining number of batches but draws them from the epoch's start (Lightning
warns so) unless the DataLoader is stateful (``state_dict()``/
``load_state_dict()``, which Lightning keeps in its loop state); the
sanity check and validation draw from torch's generator. Epoch-end saves
with stateless data and no sanity check resume bit for bit
(tests/python/test_lightning.py).
"""

import json
import os
import signal

from lightning.pytorch.callbacks import Callback
from lightning.pytorch.plugins.environments import ClusterEnvironment
from lightning.pytorch.plugins.io import CheckpointIO as _LightningCheckpointIO
from lightning.pytorch.strategies import DDPStrategy as _LightningDDPStrategy

from baton import _baton, storage
from baton.restore_match import optimizer_ids_as_ints
from baton.rng import RNGState

_POINTER_KEYS = ("baton_dir", "step")


class _Whole:
    """Lightning's checkpoint dict as one object of the state (its tensors allocated at restore)."""

    def __init__(self, value=None):
        self.value = value

    def state_dict(self):
        # At restore, an empty dict: baton allocates every array of the
        # version inside a non-module object from the checkpoint's metadata.
        return self.value if self.value is not None else {}

    def load_state_dict(self, value):
        self.value = value


class _AnyWriters:
    """The root of a load: a version this CheckpointIO saved ({"lightning": _Whole, "rng": RNGState}), or one
    another writer saved from Lightning's checkpoint dict, its keys at the top of the tree (`baton ckpt import`
    of a .ckpt file, dcp.save or dcp.async_save with a BatonWriter).

    One restore reads either (Checkpointer.restore with one object as the state: the whole tree goes to
    load_state_dict; strict=False, so that the keys of the other form are no error): a version of this
    CheckpointIO fills ``whole`` (and this rank's generators), another's tree arrives here whole, the two live
    keys beside it untouched."""

    def __init__(self):
        self.whole, self.rng, self.value = _Whole(), RNGState(), None

    def state_dict(self):
        return {"lightning": self.whole, "rng": self.rng}

    def load_state_dict(self, value):
        self.value = value

    def checkpoint(self):
        """Lightning's checkpoint dict as its writer had it."""
        if self.whole.value is not None:
            return self.whole.value
        tree = {k: v for k, v in self.value.items() if v is not self.whole and v is not self.rng}
        # A torch.save file imported by `baton ckpt import` keeps its own structure beside its tensors (int
        # optimizer ids, OrderedDicts): the object it held, rebuilt of the tensors just read.
        from baton.dcp import convert_structure
        if convert_structure.STRUCTURE_KEY in tree:
            return convert_structure.rebuilt(tree)
        # dcp.save kept each optimizer's parameter ids as str ("state.0.exp_avg"): Lightning hands each entry
        # to optimizer.load_state_dict, which would keep "0" beside the parameter 0 and lose the state.
        states = tree.get("optimizer_states")
        if isinstance(states, list):
            tree["optimizer_states"] = [optimizer_ids_as_ints(s) for s in states]
        return tree


class CheckpointIO(_LightningCheckpointIO):
    """Lightning's CheckpointIO over a baton.Checkpointer (collective saves and loads)."""

    def __init__(self, checkpointer):
        super().__init__()
        if not hasattr(checkpointer, "save") or not hasattr(checkpointer, "restore"):
            raise _baton.InvalidArgument(f"baton.lightning.CheckpointIO({checkpointer!r}): give a baton.Checkpointer")
        self.checkpointer = checkpointer
        self._rank = checkpointer._runtime.rank
        self._saved_step = None  # the version this process saved last: one save per step
        self.saves = 0  # Checkpointer.save calls made (a test's count of double saves)

    def save_checkpoint(self, checkpoint, path, storage_options=None):
        """Saves ``checkpoint`` as version ``checkpoint["global_step"]`` (collective), then the pointer at ``path``."""
        if storage_options is not None:
            raise _baton.InvalidArgument(f"baton.lightning.CheckpointIO.save_checkpoint({path!r}): storage_options="
                                         f"{storage_options!r} is not supported (baton's options are the "
                                         "Checkpointer's)")
        step = checkpoint.get("global_step")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise _baton.InvalidArgument(f"baton.lightning.CheckpointIO.save_checkpoint({path!r}): global_step="
                                         f"{step!r} must be a step count (int >= 0)")
        if step != self._saved_step:
            self.checkpointer.save({"lightning": _Whole(checkpoint), "rng": RNGState()}, step)
            self._saved_step = step
            self.saves += 1
        if self._rank == 0:
            _write_pointer(os.fspath(path), {"baton_dir": self.checkpointer.dir, "step": step})
            _remove_stale_pointers(os.path.dirname(os.fspath(path)) or ".", self.checkpointer.dir)

    def load_checkpoint(self, path, map_location=None, weights_only=None):
        """The checkpoint dict of the pointer at ``path`` (or the newest version: ``path`` = the checkpoint directory)."""
        path = os.fspath(path)
        step = None
        if not _same_dir(path, self.checkpointer.dir):
            pointer = _read_pointer(path)
            if not _same_dir(pointer["baton_dir"], self.checkpointer.dir):
                raise _baton.InvalidArgument(f"baton.lightning.CheckpointIO.load_checkpoint({path!r}): the pointer names "
                                             f"{pointer['baton_dir']!r}, this Checkpointer's directory is "
                                             f"{self.checkpointer.dir!r}")
            step = pointer["step"]
            held = _steps_held(self.checkpointer.dir)
            if step not in held:
                # Every rank reads the same pointer and directory: all raise alike.
                raise _baton.NotFound(
                    f"baton.lightning.CheckpointIO.load_checkpoint({path!r}): the pointer names step {step}, which "
                    f"{self.checkpointer.dir!r} no longer holds (the Checkpointer's keep= removed it); it holds "
                    + (f"steps {sorted(held)}" if held else "no version")
                    + f"; ckpt_path={self.checkpointer.dir!r} (resume_path()) resumes from the newest")
        root = _AnyWriters()
        # RNGState: this rank's generators, as saved at the same world size;
        # at another one they are left as they are (the data's order and the
        # weights are what matter for going on).
        got = self.checkpointer.restore(root, step=step, strict=False, drop_rank_state_on_resize=True)
        if got is None:
            raise _baton.NotFound(f"baton.lightning.CheckpointIO.load_checkpoint({path!r}): no checkpoint in "
                                  f"{self.checkpointer.dir!r}")
        self._saved_step = got  # the version exists: a save of the same step is not made again
        checkpoint = root.checkpoint()
        if map_location is not None:
            import torch
            checkpoint = _to_device(checkpoint, torch, map_location)
        return checkpoint

    def remove_checkpoint(self, path):
        """Removes the pointer at ``path`` (the version stays until the Checkpointer's keep= drops it)."""
        try:
            os.remove(os.fspath(path))
        except FileNotFoundError:
            pass

    def resume_path(self):
        """The checkpoint directory when it holds a version (for ``Trainer.fit(ckpt_path=)``), else None (collective)."""
        return self.checkpointer.dir if self.checkpointer.read_metadata() is not None else None


class DDPStrategy(_LightningDDPStrategy):
    """Lightning's DDPStrategy whose saves involve every rank (baton's save is collective)."""

    def save_checkpoint(self, checkpoint, filepath, storage_options=None):
        if isinstance(self.checkpoint_io, CheckpointIO):
            self.checkpoint_io.save_checkpoint(checkpoint, filepath, storage_options=storage_options)
        else:
            super().save_checkpoint(checkpoint, filepath, storage_options=storage_options)


class Environment(ClusterEnvironment):
    """The ranks of a baton.Runtime, started by srun or mpirun: Lightning starts no process."""

    def __init__(self, runtime):
        super().__init__()
        self.runtime = runtime

    @property
    def creates_processes_externally(self):
        return True

    @property
    def main_address(self):
        return os.environ.get("MASTER_ADDR") or self.runtime.host_of(0)

    @property
    def main_port(self):
        # baton.init_process_group has set the group up by then; Lightning
        # only reads this to export it.
        return int(os.environ.get("MASTER_PORT", "0"))

    @staticmethod
    def detect():
        return False  # chosen explicitly, never guessed

    def world_size(self):
        return self.runtime.size

    def set_world_size(self, size):
        if size != self.runtime.size:
            raise _baton.InvalidArgument(f"baton.lightning.Environment: the Trainer asks for {size} processes "
                                         f"(devices x num_nodes), the job has {self.runtime.size} ranks: give "
                                         f"devices={self.runtime.local_size}, num_nodes={self.runtime.num_nodes}")

    def global_rank(self):
        return self.runtime.rank

    def set_global_rank(self, rank):
        if rank != self.runtime.rank:
            raise _baton.InvalidArgument(f"baton.lightning.Environment: the Trainer makes this process rank {rank}, "
                                         f"baton's Runtime rank {self.runtime.rank}: give devices="
                                         f"{self.runtime.local_size}, num_nodes={self.runtime.num_nodes}")

    def local_rank(self):
        return self.runtime.local_rank

    def node_rank(self):
        return self.runtime.node


class AgreedStop(Callback):
    """baton's agreed stop and step records inside a Trainer; ``exit_code`` is 75 after a stop.

    At every batch's end: ``Runtime.end_step(loss)`` and
    ``Runtime.should_stop()`` (collective, the same answer on every rank).
    On a stop: ``trainer.save_checkpoint`` at ``dirpath`` (default:
    ``<default_root_dir>/checkpoints``) unless this step is saved already,
    then ``trainer.should_stop``. SIGTERM (which Lightning would take over)
    is turned into baton's stop signal while the Trainer trains.
    """

    def __init__(self, runtime, dirpath=None):
        super().__init__()
        self.runtime = runtime
        self.dirpath = dirpath
        self.stopped_at = None  # the global step of the agreed stop

    @property
    def exit_code(self):
        return _baton.EXIT_REQUEUE if self.stopped_at is not None else 0

    def on_train_start(self, trainer, pl_module):
        # Lightning's signal connector replaced baton's SIGTERM handler with
        # its own (a broadcast inside the handler, then an exception at the
        # next step: no save). Sending baton's stop signal to this process
        # instead makes SIGTERM the agreed stop again.
        stop_signal = _stop_signal()
        signal.signal(signal.SIGTERM, lambda *_: os.kill(os.getpid(), stop_signal))

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.runtime.begin_step(trainer.global_step + 1)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        self.runtime.end_step(float(loss) if loss is not None else None)
        if self.stopped_at is None and self.runtime.should_stop():
            step = trainer.global_step
            self.stopped_at = step
            io = trainer.strategy.checkpoint_io
            if not (isinstance(io, CheckpointIO) and io._saved_step == step):
                dirpath = self.dirpath or os.path.join(trainer.default_root_dir, "checkpoints")
                trainer.save_checkpoint(os.path.join(dirpath, f"stop-step={step}.ckpt"))
            trainer.should_stop = True


def _stop_signal():
    """baton's stop signal: $BATON_STOP_SIGNAL (a name or a number), else SIGUSR2, as the Runtime reads it."""
    text = os.environ.get("BATON_STOP_SIGNAL", "").strip()
    if not text:
        return signal.SIGUSR2
    if text.isdigit():
        return signal.Signals(int(text))
    name = text.upper()
    return signal.Signals[name if name.startswith("SIG") else "SIG" + name]


def _write_pointer(path, pointer):
    """The pointer file, written atomically (temporary, fsync, rename)."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(pointer, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_pointer(path):
    try:
        with open(path) as f:
            pointer = json.load(f)
    except FileNotFoundError:
        raise _baton.NotFound(f"baton.lightning.CheckpointIO.load_checkpoint({path!r}): no such file") from None
    except (OSError, ValueError) as e:
        raise _baton.InvalidArgument(f"baton.lightning.CheckpointIO.load_checkpoint({path!r}): not a baton pointer "
                                     f"file ({e})") from None
    if not isinstance(pointer, dict) or any(k not in pointer for k in _POINTER_KEYS) or \
            isinstance(pointer["step"], bool) or not isinstance(pointer["step"], int):
        raise _baton.InvalidArgument(f"baton.lightning.CheckpointIO.load_checkpoint({path!r}): not a baton pointer "
                                     f"file (it needs {list(_POINTER_KEYS)}): {pointer!r:.200}")
    return pointer


def _steps_held(baton_dir):
    """The steps of the committed versions in ``baton_dir`` (their directories, docs/checkpoint-format.md)."""
    return {step for _, step in storage.committed_versions(baton_dir)}


# A pointer is a few dozen bytes; a larger file is not one (a real Lightning checkpoint, left by another run).
_POINTER_MAX_BYTES = 4096


def _remove_stale_pointers(directory, baton_dir):
    """Removes the pointer files in ``directory`` that name ``baton_dir`` and a step it no longer holds."""
    held = _steps_held(baton_dir)
    for name in os.listdir(directory):
        p = os.path.join(directory, name)
        try:
            if not os.path.isfile(p) or os.path.getsize(p) > _POINTER_MAX_BYTES:
                continue
            with open(p) as f:
                pointer = json.load(f)
        except (OSError, ValueError):
            continue  # not a pointer (or gone meanwhile): not ours to judge
        if (isinstance(pointer, dict) and isinstance(pointer.get("step"), int)
                and isinstance(pointer.get("baton_dir"), str) and _same_dir(pointer["baton_dir"], baton_dir)
                and pointer["step"] not in held):
            try:
                os.remove(p)
            except FileNotFoundError:
                pass


def _same_dir(a, b):
    return os.path.realpath(a) == os.path.realpath(b)


def _to_device(value, torch, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return type(value)((k, _to_device(v, torch, device)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v, torch, device) for v in value)
    return value
