"""A torch.save file's own structure, kept beside its tensors in DCP form.

DCP stores a state dict flattened: dict keys become strings ('0' for an
optimizer state's parameter index 0), empty containers vanish, an
OrderedDict's attributes (a module state dict's _metadata) are lost. An
optimizer state whose keys come back as strings loads into nothing
(torch.optim.Optimizer.load_state_dict matches int ids), so `import` of a
torch.save file also stores the object itself, pickled with every tensor
DCP holds replaced by its DCP name (a persistent id, as torch.save refers
to its storages), under STRUCTURE_KEY. `export --format torch` rebuilds
the object from it exactly; DCP readers see one more bytes entry, which
`export --format dcp` leaves out.
"""
import io
import pickle

import torch
from torch.distributed.checkpoint._nested_dict import flatten_state_dict

from baton import _baton
from baton.dcp import safe_unpickle

# No state dict of a training program has this key; its value is bytes.
STRUCTURE_KEY = "__baton_torch_save_structure__"


class _Pickler(pickle.Pickler):
    def __init__(self, f, names):
        super().__init__(f, protocol=pickle.HIGHEST_PROTOCOL)
        self._names = names

    def persistent_id(self, obj):
        if isinstance(obj, torch.Tensor):
            return self._names.get(id(obj))
        return None


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


def with_structure(obj):
    """The state dict DCP saves for `obj` (a dict loaded by torch.load): its own, plus STRUCTURE_KEY."""
    if STRUCTURE_KEY in obj:
        raise _baton.InvalidArgument("import: the state dict already has the key %r" % STRUCTURE_KEY)
    flat, _ = flatten_state_dict(obj)
    names = {id(t): name for name, t in _tensors(flat).items()}
    buf = io.BytesIO()
    _Pickler(buf, names).dump(obj)
    out = dict(obj)
    out[STRUCTURE_KEY] = buf.getvalue()
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
