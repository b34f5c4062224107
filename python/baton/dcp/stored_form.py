"""How a DCP tensor chunk of any dtype DCP saves is stored as a baton array: the one stored form.

The rule is baton.tensors' (stored_view, stored_shape: complex as float
pairs in a last dimension of 2, float8 variants as their bytes), the same
for a leaf baton.Checkpointer walks, so that a version either front end
wrote is read by every reader; the true dtype is in the state-dict tree.
"""
from baton import tensors


def stored_shape(sizes, dtype):
    """The baton array's shape for a chunk of `sizes` ((1,) for a 0-d one) and DCP dtype `dtype`."""
    return tensors.stored_shape(sizes, dtype)


def register(ck, name, t, first, global_shape):
    """Registers `t` (rows [first, ...) of the chunk, of its DCP dtype) as array `name` of stored `global_shape`."""
    baton_dtype = tensors.describe(t, (name,))[2]
    t = tensors.stored_view(t)
    options = {"dtype": baton_dtype} if baton_dtype in ("f8e4m3", "f8e5m2") else {}
    if baton_dtype in ("f8e4m3", "f8e5m2"):
        t = t.view(tensors.torch_module().uint8)  # the extension's view has no DLPack code of an 8-bit float
    ck.register_sharded(name, t, offset=first, global_shape=list(global_shape), **options)
    return t
