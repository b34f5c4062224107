"""A torch.save file's structure as `baton ckpt import` kept it before 2026-12-07, read back.

Until 2026-12-07 import saved a torch.save file in DCP's flat form (dict
keys as strings, '0' for an optimizer state's parameter index 0; empty
containers and an OrderedDict's _metadata lost) through BatonWriter, and
kept the object's own structure beside it: the object pickled with every
tensor replaced by its DCP name (a persistent id, as torch.save refers to
its storages), under STRUCTURE_KEY. Import now saves the object with
Checkpointer.save, whose JSON tree holds that structure itself
(convert.py); versions imported before are still exported and restored
exactly: `rebuilt` makes the object again of the tensors just read, its
pickle read by baton.dcp.safe_unpickle (what torch.load(weights_only=True)
reads), never run.
"""
import io

import torch
from torch.distributed.checkpoint._nested_dict import flatten_state_dict

from baton import _baton
from baton.dcp import safe_unpickle

# No state dict of a training program has this key; its value is bytes.
STRUCTURE_KEY = "__baton_torch_save_structure__"


class _Unpickler(safe_unpickle.Unpickler):
    """baton.dcp.safe_unpickle's unpickler (what torch.load(weights_only=True) allows), its tensors by DCP name."""

    def __init__(self, f, tensors):
        super().__init__(f, "%s (the stored torch.save structure)" % STRUCTURE_KEY)
        self._tensors = tensors

    def persistent_load(self, pid):
        if pid not in self._tensors:
            raise _baton.CorruptCheckpointError(
                "%s: the stored torch.save structure refers to %r, which the version does not hold"
                % (STRUCTURE_KEY, pid))
        return self._tensors[pid]


def _tensors(flat):
    """{name: tensor} of every tensor in DCP's flat state dict, the same names for the saved and the loaded one:
    a leaf that is a tensor by its fqn, one inside a leaf DCP keeps whole (a tuple of tensors) by fqn#path."""
    out = {}

    def walk(value, name):
        if isinstance(value, torch.Tensor):
            out[name] = value
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, "%s#%r" % (name, k))
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, "%s#%d" % (name, i))

    for fqn, value in flat.items():
        walk(value, fqn)
    return out


def rebuilt(sd):
    """The object a torch.save file held, from the state dict DCP loaded; `sd` itself when it has no structure."""
    if STRUCTURE_KEY not in sd:
        return sd
    blob = sd.pop(STRUCTURE_KEY)
    flat, _ = flatten_state_dict(sd)
    tensors = _tensors(flat)
    data = blob.getvalue() if isinstance(blob, io.BytesIO) else blob
    return _Unpickler(io.BytesIO(data), tensors).load()
