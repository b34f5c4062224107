"""Tensors and NumPy arrays as baton arrays: dtypes, buffers, allocation.

torch is looked up in sys.modules, never imported here: a program that has
not imported torch holds no tensors, and NumPy programs do not pay torch's
import time.
"""

import sys

import numpy as np

from baton.metadata import path_text

# baton's dtypes are the C++ library's (base/dtype.cc, the one table:
# baton._baton._dtypes()): a NumPy or torch dtype maps to a name by the rule
# the extension's array view uses (float, signed, unsigned and its bits;
# bool; bf16; the two 8-bit floats), and the name counts only where the
# extension has it, so a type baton learns is kept here at once.
#
# The dtypes DCP saves that baton has no type of are stored as the same
# bytes under one it has (one stored form for every front end: the
# Checkpointer's walk and BatonWriter, docs/checkpoint-format.md), the true
# dtype being in the state-dict tree's node:
# - complex64 / complex128: f32 / f64 with a last dimension of 2
#   (torch.view_as_real: the real and imaginary parts);
# - float8_e4m3fn / float8_e5m2: f8e4m3 / f8e5m2, registered as their bytes
#   (the extension's array view has no DLPack code for them);
# - any other 1-byte float (float8_e4m3fnuz, float8_e5m2fnuz,
#   float8_e8m0fnu): u8.
_FLOAT8 = {"float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}  # torch's names: exported as raw bytes
_STORED_AS_BYTES = "u8"
_names = None


def baton_has(name):
    """Whether the extension has the baton dtype ``name``."""
    return name in _dtype_sizes()


def baton_dtypes():
    """The baton dtype names the extension has, for messages."""
    return list(_dtype_sizes())


def _dtype_sizes():
    global _names
    if _names is None:
        from baton import _baton
        _names = dict(_baton._dtypes())
    return _names


def torch_dtype(name):
    """The torch dtype of baton dtype ``name`` (the naming rule read backwards), or None."""
    torch = _torch()
    if name in ("bool", "bf16"):
        return {"bool": torch.bool, "bf16": torch.bfloat16}[name]
    for text, baton in _FLOAT8.items():
        if baton == name:
            return getattr(torch, text, None)
    words = {"f": "float", "i": "int", "u": "uint"}
    if name[:1] in words and name[1:].isdigit():
        dt = getattr(torch, words[name[0]] + name[1:], None)
        return dt if isinstance(dt, torch.dtype) and _torch_name(dt) == name and baton_has(name) else None
    return None


def is_reinterpreted(dtype):
    """Whether torch dtype ``dtype`` is stored under another dtype's name (complex, 1-byte floats baton lacks)."""
    known = _REINTERPRETED.get(dtype)
    if known is None:
        text = str(dtype).replace("torch.", "")
        known = _REINTERPRETED[dtype] = dtype.is_complex or (dtype.itemsize == 1 and text.startswith("float") and
                                                             text not in _FLOAT8)
    return known


# Per torch dtype (a handful): is_reinterpreted and describe's names, asked for every leaf of every save and
# restore (5,040 is_reinterpreted calls in five restores of the 256 MiB FSDP2 state, cProfile, 2026-12-06).
_REINTERPRETED = {}
_DESCRIBED = {}


def stored_view(value):
    """The tensor or array a leaf is registered as: itself, or a view of its bytes (no copy) in its stored form."""
    if isinstance(value, np.ndarray) or not is_reinterpreted(value.dtype):
        return value
    if value.dtype.is_complex:
        return _torch().view_as_real(value)
    return value.view(_torch().uint8)


def same_stored_dtype(value, lib, saved):
    """Whether a state's tensor or array may take the bytes of a tree node of ``lib`` and dtype name ``saved``.

    Where either side is stored under another dtype's name (is_reinterpreted),
    the names must be the same: complex64's pairs are not a float32 tensor's.
    """
    if isinstance(value, np.ndarray) or lib != "torch":
        return True
    torch = _torch()
    node = getattr(torch, str(saved), None)
    mine = is_reinterpreted(value.dtype)
    theirs = isinstance(node, torch.dtype) and is_reinterpreted(node)
    return not (mine or theirs) or node == value.dtype


def stored_shape(shape, dtype):
    """The stored array's shape of a tensor of ``shape`` and torch or NumPy dtype (or its name) ``dtype``."""
    text = str(dtype).replace("torch.", "")
    return tuple(shape) + ((2,) if text.startswith("complex") else ())


def _numpy_name(dtype):
    if dtype.kind == "b":
        return "bool"
    if dtype.kind in "fiu" and (dtype.isnative or dtype.itemsize == 1):
        return f"{dtype.kind}{dtype.itemsize * 8}"
    return None


def _torch_name(dtype):
    torch = _torch()
    text = str(dtype).replace("torch.", "")
    if dtype == torch.bool:
        return "bool"
    if dtype == torch.bfloat16:
        return "bf16"
    if text in _FLOAT8:
        return _FLOAT8[text]
    if dtype.is_complex:
        return {8: "f32", 16: "f64"}.get(dtype.itemsize)  # stored_view: view_as_real
    if is_reinterpreted(dtype):
        return _STORED_AS_BYTES
    kind = "f" if dtype.is_floating_point else ("i" if dtype.is_signed else "u")
    bits = dtype.itemsize * 8
    # Only the plain types (float32, int8, uint16...): not quantized, bits8 or sub-byte ints that share a size.
    if text != {"f": "float", "i": "int", "u": "uint"}[kind] + str(bits):
        return None
    return f"{kind}{bits}"


def torch_module():
    return sys.modules.get("torch")


def is_tensor(value):
    torch = torch_module()
    return torch is not None and isinstance(value, torch.Tensor)


def is_array(value):
    return isinstance(value, np.ndarray) or is_tensor(value)


def is_module(obj):
    torch = torch_module()
    return torch is not None and isinstance(obj, torch.nn.Module)


def describe(value, path):
    """(lib, dtype text, baton dtype) of a tensor or array; TypeError naming the path."""
    if isinstance(value, np.ndarray):
        baton = _numpy_name(value.dtype)
        if baton is None or not baton_has(baton):
            raise TypeError(f"baton: '{path_text(path)}': NumPy dtype {value.dtype} has no baton type "
                            f"(baton keeps {', '.join(baton_dtypes())})")
        return "numpy", value.dtype.str, baton
    known = _DESCRIBED.get(value.dtype)
    if known is not None:
        return known
    name = str(value.dtype).replace("torch.", "")
    baton = _torch_name(value.dtype)
    if baton is None or not baton_has(baton):
        raise TypeError(f"baton: '{path_text(path)}': torch dtype {value.dtype} has no baton type "
                        f"(baton keeps {', '.join(baton_dtypes())})")
    known = _DESCRIBED[value.dtype] = ("torch", name, baton)
    return known


def check_keepable(value, path):
    """TypeError naming the path for a tensor baton cannot keep as an array of bytes.

    Sparse tensors (their layout is not strided: no dense bytes), meta
    tensors (no data at all), nested tensors (ragged) and ShardedTensor
    (torch.distributed's older split tensor) would otherwise fail deep in
    DLPack with a RuntimeError naming no path. A DTensor is its own leaf
    kind (state_walk.DTENSOR: its local shard comes here); inside
    baton.Sharded it is refused (the Sharded would claim dim-0 rows of a
    tensor whose own layout says otherwise).
    """
    if isinstance(value, np.ndarray):
        return
    torch = torch_module()
    kind = type(value).__name__
    why = None
    if kind == "DTensor":
        why = ("a DTensor inside baton.Sharded: give the DTensor itself (baton.Checkpointer saves each rank's "
               "local shard and reshards at restore from the DTensor's own placements and mesh)")
    elif kind == "ShardedTensor":
        why = (f"a {kind} is split over the ranks by torch.distributed; give this rank's part as "
               "baton.Sharded(local_tensor, offset, global_shape)")
    elif getattr(value, "is_nested", False):
        why = "a nested (ragged) tensor has no single shape"
    elif value.layout != torch.strided:
        why = f"a {value.layout} tensor has no dense bytes (keep its .to_dense(), or its indices and values)"
    elif value.device.type == "meta":
        why = "a meta tensor holds no data (materialize it first, e.g. module.to_empty(device=...))"
    if why is not None:
        raise TypeError(f"baton: cannot keep '{path_text(path)}': {why}")


def allocate(lib, dtype, shape, path, zeroed=True):
    """A new tensor or array for an array the state lacks (lazily created optimizer state).

    ``zeroed=False`` where the restore writes every byte of it before the program sees it (an array registered
    whole): no pass that writes zeros the read then overwrites (torch.zeros was 5 ms of a 12 ms load of
    15 MiB here). A DTensor's whole tensor is zeroed: its saved boxes are what fills it."""
    shape = tuple(int(d) for d in shape)
    if lib == "torch":
        torch = torch_module()
        if torch is None:
            import torch
        dt = getattr(torch, dtype, None) if isinstance(dtype, str) else None
        if not isinstance(dt, torch.dtype) or _torch_name(dt) is None or not baton_has(_torch_name(dt)):
            raise ValueError(f"baton: '{path_text(path)}': the checkpoint names torch dtype {dtype!r}")
        # On the host whatever the program's default device (torch.set_default_device): the extension
        # writes host memory, and load() gives host tensors.
        return (torch.zeros if zeroed else torch.empty)(shape, dtype=dt, device="cpu")
    if lib == "numpy":
        try:
            dt = np.dtype(dtype)
        except TypeError:
            raise ValueError(f"baton: '{path_text(path)}': the checkpoint names NumPy dtype {dtype!r}") from None
        if _numpy_name(dt) is None or not baton_has(_numpy_name(dt)):
            raise ValueError(f"baton: '{path_text(path)}': the checkpoint names NumPy dtype {dtype!r}")
        return np.zeros(shape, dtype=dt) if zeroed else np.empty(shape, dtype=dt)
    raise ValueError(f"baton: '{path_text(path)}': the checkpoint names array library {lib!r}")


class Binding:
    """How one leaf is handed to the extension.

    ``buffer`` is what is registered (the tensor itself, detached, or the
    NumPy array: the extension keeps a reference and copies nothing);
    ``dtype`` the baton dtype name given with it. A CUDA tensor or a
    non-contiguous one is registered through a host copy (``mirror``):
    refreshed from the leaf before every save, copied back after a restore.
    ``receive``: a save's buffer that rank 0's copy is
    broadcast into (replicas="rank0"), the leaf left as it is.
    """

    __slots__ = ("leaf", "buffer", "dtype", "mirror", "receive")

    def __init__(self, leaf, baton_dtype, receive=False):
        self.leaf = leaf
        self.dtype = baton_dtype
        self.mirror = receive
        self.receive = receive
        if isinstance(leaf, np.ndarray):
            if self.mirror:
                self.buffer = np.empty(leaf.shape, dtype=leaf.dtype)
            elif leaf.flags.c_contiguous:
                self.buffer = leaf
            else:
                self.buffer = np.ascontiguousarray(leaf)
                self.mirror = True
        else:
            t = leaf.detach()
            if self.mirror:
                t = _torch().empty(tuple(t.shape), dtype=t.dtype, device="cpu")
            elif t.device.type != "cpu" or not t.is_contiguous():
                # Untested on CUDA (no GPU on this project's machine).
                t = t.to(device="cpu", memory_format=_contiguous(), copy=True)
                self.mirror = True
            if baton_dtype in ("bool", "f8e4m3", "f8e5m2"):
                # torch 1.13's DLPack export refused bool, and the extension's
                # view knows no DLPack code of an 8-bit float: the bytes are u8,
                # registered with their baton dtype.
                t = t.view(_torch().uint8)
            self.buffer = t

    def before_save(self):
        if not self.mirror or self.receive:
            return
        if isinstance(self.leaf, np.ndarray):
            np.copyto(self.buffer, self.leaf)
        else:
            self._host().copy_(self.leaf.detach())

    def after_restore(self):
        """Copies the restored bytes into the leaf; a tensor's autograd version counter moves, as copy_ moves it."""
        if not self.mirror:
            if not isinstance(self.leaf, np.ndarray):  # the extension wrote the leaf's memory itself
                _torch().autograd.graph.increment_version(self.leaf)
            return
        if isinstance(self.leaf, np.ndarray):
            np.copyto(self.leaf, self.buffer)
        else:
            with _torch().no_grad():
                self.leaf.copy_(self._host())

    def bytes_view(self):
        """The buffer's bytes as a writable 1-d NumPy uint8 array (the same memory)."""
        if isinstance(self.buffer, np.ndarray):
            return self.buffer.reshape(-1).view(np.uint8)
        return self.buffer.reshape(-1).view(_torch().uint8).numpy()

    def _host(self):
        if isinstance(self.buffer, np.ndarray) or self.buffer.dtype == self.leaf.dtype:
            return self.buffer
        return self.buffer.view(self.leaf.dtype)


def identity(leaf):
    """What must stay the same for a registration to be reused: the memory and its layout.

    Not the object: module.state_dict() makes new tensor objects (detached
    views) at every call. The memory is enough: the registration keeps the
    registered tensor, so its memory cannot be freed and reused for another
    while it is registered; the same address is the same storage.
    """
    if isinstance(leaf, np.ndarray):
        return ("numpy", leaf.__array_interface__["data"][0], leaf.shape, leaf.strides, leaf.dtype.str)
    # The device itself (hashable, compared by type and index): its str() was half of this call's 1.4 us.
    return ("torch", leaf.data_ptr(), tuple(leaf.shape), tuple(leaf.stride()), leaf.dtype, leaf.device)


def _torch():
    return sys.modules["torch"]


def _contiguous():
    return _torch().contiguous_format
