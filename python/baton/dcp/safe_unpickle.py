"""Reading what DCP pickled without running code from it.

DCP pickles two things: its Metadata (FileSystemWriter's ``.metadata``,
the ``dcp-metadata`` array of a BatonWriter version from before the one
format) with pickle protocol 4 or 5, and each non-tensor value of a state
dict with torch.save (a "bytes entry"; in baton's tree, a ``$pickle``
value, state_tree.py), which
its default planner loads with ``torch.load(weights_only=False)``. A
checkpoint is data: whoever can write one must not be able to run code in
the program that reads it. So every reader in this package goes through
here:

- ``metadata(data, what)``: the Metadata, through ``Unpickler``: Python's
  own unpickler (torch's weights-only unpickler reads protocol 2 only) with
  torch's rules: a global is one ``torch.load(weights_only=True)`` allows
  (torch's list, plus what the program added with
  torch.serialization.add_safe_globals) or one of DCP's metadata
  dataclasses; only those are called, built or instantiated.
- ``torch_object(data, what)``: a bytes entry, through
  ``torch.load(weights_only=True)`` itself.
- ``resaved(data, what)``: a bytes entry as torch.save bytes made again from
  what ``torch_object`` read, for a DCP planner that will torch.load them
  with weights_only=False: it then finds nothing but allowed globals.

Anything else is refused with ``baton.InvalidArgument`` naming the entry
(``what``) and the global; nothing it names is imported or run.
"""
import enum
import io
import pickle

from baton import _baton

# What a refusal says the program can do.
_HINT = ("no code from a checkpoint is run; if the object is trusted, allow its class with "
         "torch.serialization.add_safe_globals")


def _dcp_globals():
    """DCP's Metadata classes and what their pickles name besides torch's list."""
    import pathlib

    from torch.distributed.checkpoint import filesystem, metadata

    classes = [metadata.Metadata, metadata.TensorStorageMetadata, metadata.TensorProperties,
               metadata.ChunkStorageMetadata, metadata.BytesStorageMetadata, metadata.MetadataIndex,
               metadata.StorageMeta, metadata._MEM_FORMAT_ENCODING, filesystem._StorageInfo,
               pathlib.PosixPath, pathlib.PurePosixPath, pathlib.Path, pathlib.PurePath]
    out = {"%s.%s" % (c.__module__, c.__qualname__): c for c in classes}
    # An Enum member pickles as getattr(TheEnum, "NAME"): only that, for an allowed Enum.
    out["builtins.getattr"] = _enum_member
    return out


def _enum_member(cls, name, *default):
    if not (isinstance(cls, type) and issubclass(cls, enum.Enum) and _allowed_value(cls)
            and isinstance(name, str) and name in cls.__members__) or default:
        raise pickle.UnpicklingError("getattr(%r, %r): only a member of an allowed Enum" % (cls, name))
    return cls[name]


def allowed_globals():
    """{"module.name": object} of every global the unpickler may name (torch's list read at each call)."""
    from torch import _weights_only_unpickler as wou

    out = dict(wou._get_allowed_globals())
    out.update(wou._get_user_allowed_globals())
    out.update(_dcp_globals())
    return out


def _allowed_value(obj):
    return any(obj is v for v in allowed_globals().values())


class Unpickler(pickle._Unpickler):  # the Python one: its opcodes can be checked one by one
    """pickle's unpickler held to torch.load(weights_only=True)'s rules, plus DCP's metadata classes.

    Unpickler(file, what): ``what`` names the entry in refusals. A subclass
    may define persistent_load (the default refuses a persistent id).
    """

    def __init__(self, file, what):
        super().__init__(file)
        self._what = what
        self._allowed = allowed_globals()
        self._ids = {id(v) for v in self._allowed.values()}
        self._classes = {id(v) for v in self._allowed.values() if isinstance(v, type)}

    def find_class(self, module, name):
        key = "%s.%s" % (module, name)
        if key not in self._allowed:
            raise pickle.UnpicklingError("it names %s, which torch.load(weights_only=True) does not allow" % key)
        return self._allowed[key]

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("it holds a persistent id (%r), which a pickled object of DCP never has"
                                     % (pid,))

    # The opcodes that call, build or instantiate: only what find_class gave (torch's rules).
    def _callable(self, obj, opcode):
        if id(obj) not in self._ids:
            raise pickle.UnpicklingError("%s on %r, which is not an allowed global" % (opcode, obj))

    def _load_reduce(self):
        self._callable(self.stack[-2], "REDUCE")
        pickle._Unpickler.load_reduce(self)

    def _load_newobj(self):
        self._callable(self.stack[-2], "NEWOBJ")
        pickle._Unpickler.load_newobj(self)

    def _load_newobj_ex(self):
        self._callable(self.stack[-3], "NEWOBJ_EX")
        pickle._Unpickler.load_newobj_ex(self)

    def _load_obj(self):  # protocol 0/1: the class is the first item after the mark
        self._callable(self.stack[0] if self.stack else None, "OBJ")
        pickle._Unpickler.load_obj(self)

    def _load_build(self):
        inst = self.stack[-2]
        if id(type(inst)) not in self._classes:
            raise pickle.UnpicklingError("BUILD on a %s, which is not an allowed class" % type(inst).__qualname__)
        pickle._Unpickler.load_build(self)

    dispatch = dict(pickle._Unpickler.dispatch)
    dispatch[pickle.REDUCE[0]] = _load_reduce
    dispatch[pickle.NEWOBJ[0]] = _load_newobj
    dispatch[pickle.NEWOBJ_EX[0]] = _load_newobj_ex
    dispatch[pickle.BUILD[0]] = _load_build
    dispatch[pickle.OBJ[0]] = _load_obj

    def load(self):
        try:
            return super().load()
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError,
                AttributeError, UnicodeDecodeError) as e:
            raise refusal(self._what, e) from None


def refusal(what, cause):
    """The baton.InvalidArgument of a pickled entry not read."""
    return _baton.InvalidArgument("%s: refused to unpickle: %s (%s)" % (what, cause, _HINT))


def metadata(data, what):
    """The DCP Metadata pickled in ``data`` (bytes), read by Unpickler; refused unless it is a Metadata."""
    from torch.distributed.checkpoint.metadata import Metadata

    md = Unpickler(io.BytesIO(bytes(data)), what).load()
    if not isinstance(md, Metadata):
        raise refusal(what, "it holds a %s, not DCP's Metadata" % type(md).__qualname__)
    return md


def torch_object(data, what):
    """The object a torch.save'd bytes entry holds, read by torch.load(weights_only=True)."""
    import torch

    raw = data.getvalue() if isinstance(data, io.BytesIO) else bytes(data)
    try:
        return torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except OSError:
        raise
    except Exception as e:  # noqa: BLE001  (torch.load's many errors: not its format, or a global it refuses)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise refusal(what, "torch.load(weights_only=True) does not read it: %s" % first) from None


def resaved(data, what):
    """A BytesIO of torch.save bytes holding what ``torch_object`` read: safe for any torch.load."""
    import torch

    buf = io.BytesIO()
    torch.save(torch_object(data, what), buf)
    buf.seek(0)
    return buf
