"""How a DCP tensor chunk of any dtype DCP saves is stored as a baton array.

DCP saves every dtype torch has; baton's arrays have the extension's
dtypes (base/dtype.cc). A chunk whose dtype baton has is stored as it is.
The others are stored as the same bytes under a dtype baton has, a view
(no copy) both ways, the true dtype being in the DCP Metadata stored with
the version:

- complex64 / complex128: float32 / float64 with a last dimension of 2
  (torch.view_as_real: the real and imaginary parts);
- float8_e4m3fn / float8_e5m2: baton's f8e4m3 / f8e5m2, registered as their
  bytes (the extension's array view has no DLPack code for them);
- any other 1-byte dtype baton lacks (float8_e4m3fnuz, float8_e5m2fnuz,
  float8_e8m0fnu): u8.
"""
import torch

_COMPLEX = {torch.complex64, torch.complex128}
_FLOAT8 = {torch.float8_e4m3fn: "f8e4m3", torch.float8_e5m2: "f8e5m2"}


def stored_shape(sizes, dtype):
    """The baton array's shape for a chunk of `sizes` ((1,) for a 0-d one) and DCP dtype `dtype`."""
    return tuple(sizes) + ((2,) if dtype in _COMPLEX else ())


def register(ck, name, t, first, global_shape):
    """Registers `t` (rows [first, ...) of the chunk, of its DCP dtype) as array `name` of stored `global_shape`."""
    if t.dtype in _COMPLEX:
        t, options = torch.view_as_real(t), {}
    elif t.dtype in _FLOAT8:
        t, options = t.view(torch.uint8), {"dtype": _FLOAT8[t.dtype]}
    elif t.dtype.itemsize == 1 and (t.dtype.is_floating_point or "float" in str(t.dtype)):
        t, options = t.view(torch.uint8), {}
    else:
        options = {}
    ck.register_sharded(name, t, offset=first, global_shape=list(global_shape), **options)
    return t
