"""Into and out of baton's format: DCP directories and torch.save files.

Run in one process (no torch.distributed needed; baton's Runtime is a
world of one): the whole state passes through this process's memory once,
as in torch.distributed.checkpoint.format_utils, whose loading planner
(_EmptyStateDictLoadPlanner: the state dict made from the checkpoint's own
Metadata) is used for every source.
"""
import os

import torch
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint.default_planner import _EmptyStateDictLoadPlanner
from torch.distributed.checkpoint.state_dict_loader import _load_state_dict
from torch.distributed.checkpoint.state_dict_saver import _save_state_dict

from baton import _baton
from baton.dcp.reader import BatonReader
from baton.dcp.writer import BatonWriter


def _read_source(source):
    """The whole state of a DCP directory (it holds .metadata) or a torch.save file."""
    if os.path.isdir(source):
        if not os.path.exists(os.path.join(source, ".metadata")):
            raise _baton.InvalidArgument(
                "import: %s is a directory without .metadata: not a DCP checkpoint (FileSystemWriter's)" % source)
        sd = {}
        _load_state_dict(sd, storage_reader=FileSystemReader(source), planner=_EmptyStateDictLoadPlanner(),
                         no_dist=True)
        return sd
    if not os.path.isfile(source):
        raise _baton.NotFound("import: %s does not exist" % source)
    # weights_only: a checkpoint file is data; pickled code in it is refused, not run.
    sd = torch.load(source, map_location="cpu", weights_only=True)
    if not isinstance(sd, dict):
        raise _baton.InvalidArgument("import: %s holds a %s, not a state dict" % (source, type(sd).__name__))
    return sd


def import_checkpoint(source, directory, step=None, runtime=None, **options):
    """Writes `source` (a DCP directory or a torch.save file) as a baton version of `directory`; returns its step."""
    sd = _read_source(source)
    writer = BatonWriter(directory, step=step, runtime=runtime, **options)
    _save_state_dict(sd, storage_writer=writer, no_dist=True)
    return writer.last_step


def export_checkpoint(directory, target, step=None, fmt="dcp", runtime=None, **options):
    """Writes a baton version written through DCP (the newest, or `step`'s) as a DCP directory or a torch.save file."""
    if fmt not in ("dcp", "torch"):
        raise _baton.InvalidArgument("export: format %r is neither 'dcp' nor 'torch'" % (fmt,))
    reader = BatonReader(directory, step=step, runtime=runtime, **options)
    sd = {}
    _load_state_dict(sd, storage_reader=reader, planner=_EmptyStateDictLoadPlanner(), no_dist=True)
    if fmt == "torch":
        torch.save(sd, target)
    else:
        _save_state_dict(sd, storage_writer=FileSystemWriter(target), no_dist=True)
    return reader.last_restore["step"]
