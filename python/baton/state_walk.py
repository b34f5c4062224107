"""A state dict walked into baton's parts: arrays, job-wide JSON, per-rank JSON.

``flatten(state)`` turns the program's state dict (the dict given to
Checkpointer.save) into

- ``leaves``: every tensor or NumPy array, by baton array name (names.py),
  with its path and whether it is a Sharded rank's rows (else replicated);
- ``tree``: the JSON-able skeleton of the whole state, job-wide: plain values
  as metadata.encode writes them, each array as a reference
  ``{"$array": name, ...}`` (its library, dtype and global shape, so that a
  restore can allocate what the state lacks), each object walked through
  ``state_dict()`` as ``{"$object": type, "module": bool, "state": ...}``,
  each per-rank object (RNGState, PerRank) as ``{"$per_rank": key}``;
- ``per_rank``: this rank's per-rank entries, by key, encoded the same way.
"""

from baton import metadata, tensors
from baton.metadata import path_text
from baton.names import array_name
from baton.wrappers import Sharded, is_per_rank


class Leaf:
    """A tensor or NumPy array of the state, as saved or restored."""

    __slots__ = ("name", "path", "value", "sharded", "offset", "global_shape", "lib", "dtype", "baton_dtype")

    def __init__(self, name, path, value, sharded=None):
        self.name = name
        self.path = path
        self.value = value  # the tensor or array itself (a Sharded's tensor)
        self.sharded = sharded is not None
        self.offset = sharded.offset if sharded is not None else 0
        self.global_shape = sharded.global_shape if sharded is not None else tuple(value.shape)
        self.lib, self.dtype, self.baton_dtype = tensors.describe(value, path)

    def ref(self):
        return {metadata.ARRAY: self.name, "lib": self.lib, "dtype": self.dtype, "shape": list(self.global_shape),
                "sharded": self.sharded}


def has_state_dict(value):
    return (not isinstance(value, dict) and callable(getattr(value, "state_dict", None)) and
            callable(getattr(value, "load_state_dict", None)))


class Flat:
    def __init__(self):
        self.leaves = {}    # name -> Leaf, in walk order
        self.per_rank = {}  # key -> encoded state
        self.tree = None


def flatten(state):
    """The Flat form of ``state``; TypeError naming the path of a leaf that cannot be kept."""
    if not isinstance(state, dict):
        raise TypeError(f"baton: the state must be a dict of names to modules, optimizers, tensors and "
                        f"values, not a {type(state).__name__}")
    flat = Flat()

    def on_other(value, path):
        if isinstance(value, Sharded):
            return _add_leaf(flat, Leaf(array_name(path), path, value.tensor, value))
        if tensors.is_array(value):
            return _add_leaf(flat, Leaf(array_name(path), path, value))
        if is_per_rank(value):
            key = array_name(path)
            flat.per_rank[key] = metadata.encode(value.state_dict(), path, _no_arrays)
            return {metadata.PER_RANK: key}
        if has_state_dict(value):
            sd = value.state_dict()
            return {metadata.OBJECT: type(value).__qualname__, "module": tensors.is_module(value),
                    "state": metadata.encode(sd, path, on_other)}
        raise metadata.unkeepable(path, value)

    flat.tree = metadata.encode(state, (), on_other)
    return flat


def _add_leaf(flat, leaf):
    other = flat.leaves.get(leaf.name)
    if other is not None:
        raise ValueError(f"baton: '{path_text(other.path)}' and '{path_text(leaf.path)}' map to the same "
                         f"array name {leaf.name!r} (keys that differ only in type, such as 0 and '0'?)")
    flat.leaves[leaf.name] = leaf
    return leaf.ref()


def _no_arrays(value, path):
    if tensors.is_array(value) or isinstance(value, Sharded):
        raise TypeError(f"baton: '{path_text(path)}': per-rank state (RNGState, PerRank) holds JSON values "
                        "only, not tensors (register a per-rank tensor as a baton.Sharded row)")
    raise metadata.unkeepable(path, value)
