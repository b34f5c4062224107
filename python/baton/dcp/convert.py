"""Into and out of baton's format: DCP directories and torch.save files.

Run in one process (no torch.distributed needed; baton's Runtime is a
world of one): the whole state passes through this process's memory once.
Each side goes through the front end whose form it is:

- a torch.save file is an object with its own structure (int keys, tuples,
  OrderedDicts and their _metadata): import saves it with
  Checkpointer.save, whose tree keeps all of that as JSON (a value JSON
  cannot hold, such as a torch.Size, as torch.save pickled it, read back
  only by safe_unpickle); export --format torch writes
  Checkpointer.load's answer, the version's own structure whoever wrote it;
- a DCP directory is DCP's flat form: import reads it with DCP's loading
  planner (_EmptyStateDictLoadPlanner: the state dict made from its own
  Metadata) and saves it with BatonWriter; export --format dcp reads the
  version with BatonReader, as torch.distributed.checkpoint.format_utils
  does, and writes it with FileSystemWriter.

Bad input is refused before anything is written (convert_checks); an
export is written beside its target and renamed into place, so a failed one
leaves no half-written target.
"""
import io
import os
import shutil

import torch
from torch.distributed.checkpoint import FileSystemWriter
from torch.distributed.checkpoint.state_dict_loader import _load_state_dict
from torch.distributed.checkpoint.state_dict_saver import _save_state_dict

from baton import _baton
from baton.checkpointer import Checkpointer
from baton.latest import latest
from baton.names import MARKER
from baton.state_walk import walk
from baton.dcp import convert_checks, convert_structure, safe_load
from baton.dcp import runtime as runtimes
from baton.dcp.reader import BatonReader
from baton.dcp.writer import BatonWriter


def _torch_pickled(value, path):
    """A value JSON cannot hold, as torch.save writes it (torch.load(weights_only=True) read it from the file)."""
    buf = io.BytesIO()
    torch.save(value, buf)
    return buf.getvalue()


class _Importer(Checkpointer):
    """Checkpointer.save of a torch.save file's object: what torch.load(weights_only=True) read of it is kept,
    the values JSON cannot hold as torch.save pickles them (state_walk.walk's ``pickled``)."""

    def _walk(self, state):
        return walk(state, pickled=_torch_pickled)


def _read_dcp(source):
    """A DCP directory's state dict (its .metadata names it all)."""
    sd = {}
    # safe_load: the source's pickles (.metadata, bytes entries) run no code.
    _load_state_dict(sd, storage_reader=safe_load.FileSystemReader(source),
                     planner=safe_load.EmptyStateDictLoadPlanner(source), no_dist=True)
    return sd


def _read_torch_file(source):
    """A torch.save file's object, read as data."""
    try:
        # weights_only: a checkpoint file is data; pickled code in it is refused, not run.
        sd = torch.load(source, map_location="cpu", weights_only=True)
    except OSError:
        raise  # the file could not be read (EIO, EACCES): a failure, not bad input
    except Exception as e:  # noqa: BLE001  (torch.load's many errors: not its format, or code it will not run)
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise _baton.InvalidArgument("import: %s is not a torch.save file that torch.load(weights_only=True) reads "
                                     "(%s: %s)" % (source, type(e).__name__, first)) from e
    if not isinstance(sd, dict):
        raise _baton.InvalidArgument("import: %s holds a %s, not a state dict" % (source, type(sd).__name__))
    return sd


def import_checkpoint(source, directory, step=None, runtime=None, keep=3, **options):
    """Writes `source` (a DCP directory or a torch.save file) as a baton version of `directory`; returns its step
    (None: one past the newest)."""
    convert_checks.check_import(source, directory)
    if os.path.isdir(source):
        sd = _read_dcp(source)
        os.makedirs(directory, exist_ok=True)
        # Closed at once: a writer keeps the directory's checkpointer (its lock) open across saves.
        with BatonWriter(directory, step=step, runtime=runtime, keep=keep, **options) as writer:
            _save_state_dict(sd, storage_writer=writer, no_dist=True)
        return writer.last_step
    sd = _read_torch_file(source)
    os.makedirs(directory, exist_ok=True)
    with _Importer(runtimes.resolve(runtime), directory, keep=keep, **options) as ck:
        if step is None:
            newest = latest(directory)
            step = 0 if newest is None else newest + 1
        ck.save(sd, step)
    return step


def _whole(directory, step, runtime, options):
    """(the version as torch.load gives a torch.save file: its own structure, whole tensors; its step).

    Checkpointer.load reads every version of the one format. A version
    BatonWriter wrote before it (DCP's pickled Metadata) is read with
    BatonReader and DCP's loading planner, as before. A torch.save file
    imported before the import went through Checkpointer.save (2026-12-07)
    carries its structure pickled beside DCP's flat form: rebuilt from it.
    """
    with Checkpointer(runtimes.resolve(runtime), directory, read_only=True, **options) as ck:
        md = ck.read_metadata(step)
        if md is None:
            return None, None
        if MARKER in {a["name"] for a in md["arrays"]}:
            sd = ck.load(md["step"])
            found = ck.last_restore()["step"]
        else:
            sd = None
    if sd is None:
        reader = BatonReader(directory, step=md["step"], runtime=runtime, **options)
        sd = {}
        _load_state_dict(sd, storage_reader=reader, planner=safe_load.EmptyStateDictLoadPlanner(directory),
                         no_dist=True)
        found = reader.last_restore["step"]
    return convert_structure.rebuilt(sd), found


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _into_place(tmp, target):
    """Renames the written `tmp` to `target`; an existing target (checked by convert_checks) is replaced."""
    if os.path.isdir(tmp) and os.path.isdir(target):
        old = tmp + ".old"
        os.rename(target, old)
        os.rename(tmp, target)
        shutil.rmtree(old)
    else:
        os.replace(tmp, target)
    _fsync_dir(os.path.dirname(os.path.abspath(target)))


def export_checkpoint(directory, target, step=None, fmt="dcp", runtime=None, force=False, **options):
    """Writes a baton version (the newest, or `step`'s) as a DCP directory or a torch.save file; returns its step."""
    convert_checks.check_export(directory, target, fmt, force)
    what = "version" if step is None else "version of step %d" % step
    if fmt == "torch":
        try:
            sd, found = _whole(directory, step, runtime, options)
        except _baton.NotFound as e:
            raise _baton.NotFound("export: %s holds no %s (%s)" % (directory, what, e)) from e
        if sd is None:
            raise _baton.NotFound("export: %s holds no %s" % (directory, what))
    else:
        reader = BatonReader(directory, step=step, runtime=runtime, **options)
        try:
            reader.read_metadata()  # before DCP's load, which would wrap this error in a CheckpointException
        except _baton.NotFound as e:
            raise _baton.NotFound("export: %s holds no %s (%s)" % (directory, what, e)) from e
        sd = {}
        _load_state_dict(sd, storage_reader=reader, planner=safe_load.EmptyStateDictLoadPlanner(directory),
                         no_dist=True)
        found = reader.last_restore["step"]
    parent, base = os.path.split(os.path.abspath(target))
    tmp = os.path.join(parent, ".%s.baton-export-%d" % (base, os.getpid()))
    try:
        if fmt == "torch":
            with open(tmp, "wb") as f:
                torch.save(sd, f)
                f.flush()
                os.fsync(f.fileno())
        else:
            sd.pop(convert_structure.STRUCTURE_KEY, None)
            _save_state_dict(sd, storage_writer=FileSystemWriter(tmp), no_dist=True)
        _into_place(tmp, target)
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
        elif os.path.lexists(tmp):
            os.unlink(tmp)
    return found
