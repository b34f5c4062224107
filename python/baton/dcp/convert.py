"""Into and out of baton's format: DCP directories and torch.save files.

Run in one process (no torch.distributed needed; baton's Runtime is a
world of one): the whole state passes through this process's memory once,
as in torch.distributed.checkpoint.format_utils, whose loading planner
(_EmptyStateDictLoadPlanner: the state dict made from the checkpoint's own
Metadata) is used for every source. Bad input is refused before anything
is written (convert_checks); an export is written beside its target and
renamed into place, so a failed one leaves no half-written target.
"""
import os
import shutil

import torch
from torch.distributed.checkpoint import FileSystemWriter
from torch.distributed.checkpoint.state_dict_loader import _load_state_dict
from torch.distributed.checkpoint.state_dict_saver import _save_state_dict

from baton import _baton
from baton.dcp import convert_checks, convert_structure, safe_load
from baton.dcp.reader import BatonReader
from baton.dcp.writer import BatonWriter


def _read_source(source):
    """The state to save: a DCP directory's (its .metadata names it all) or a torch.save file's, with its structure."""
    if os.path.isdir(source):
        sd = {}
        # safe_load: the source's pickles (.metadata, bytes entries) run no code.
        _load_state_dict(sd, storage_reader=safe_load.FileSystemReader(source),
                         planner=safe_load.EmptyStateDictLoadPlanner(source), no_dist=True)
        return sd
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
    return convert_structure.with_structure(sd)


def import_checkpoint(source, directory, step=None, runtime=None, keep=3, **options):
    """Writes `source` (a DCP directory or a torch.save file) as a baton version of `directory`; returns its step."""
    convert_checks.check_import(source, directory)
    sd = _read_source(source)
    os.makedirs(directory, exist_ok=True)
    # Closed at once: a writer keeps the directory's checkpointer (its lock) open across saves.
    with BatonWriter(directory, step=step, runtime=runtime, keep=keep, **options) as writer:
        _save_state_dict(sd, storage_writer=writer, no_dist=True)
    return writer.last_step


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
    """Writes a baton version written through DCP (the newest, or `step`'s) as a DCP directory or a torch.save
    file; returns its step."""
    convert_checks.check_export(directory, target, fmt, force)
    reader = BatonReader(directory, step=step, runtime=runtime, **options)
    try:
        reader.read_metadata()  # before DCP's load, which would wrap this error in a CheckpointException
    except _baton.NotFound as e:
        what = "version" if step is None else "version of step %d" % step
        raise _baton.NotFound("export: %s holds no %s (%s)" % (directory, what, e)) from e
    sd = {}
    _load_state_dict(sd, storage_reader=reader, planner=safe_load.EmptyStateDictLoadPlanner(directory), no_dist=True)
    parent, base = os.path.split(os.path.abspath(target))
    tmp = os.path.join(parent, ".%s.baton-export-%d" % (base, os.getpid()))
    try:
        if fmt == "torch":
            with open(tmp, "wb") as f:
                torch.save(convert_structure.rebuilt(sd), f)
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
    return reader.last_restore["step"]
