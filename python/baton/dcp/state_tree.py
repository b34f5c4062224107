"""DCP's flat view of a state dict and baton's state-dict tree, both ways: what makes one format.

Every version baton writes from Python holds one description of its state:
the JSON tree of baton.Checkpointer (checkpointer.py: ``{"format":
"baton.state_dict", "version": 1, "tree": ...}`` in the version's user blob,
beside the ``~baton.state_dict`` marker array), whose array nodes name the
baton arrays that hold each tensor's boxes. Each box is named by one rule
(names.array_name for a tensor saved whole, dtensor_chunks.chunk_name for a
box of a DTensor), whoever wrote it.

- ``tree_of_plan``: BatonWriter's side. DCP's global save plan (its
  WriteItems, the planners' fqn -> path mappings) and the non-tensor values
  become that tree: a tensor of DCP's is an array node (a DTensor's chunks
  its boxes), a value is JSON (metadata.encode) or, where JSON cannot hold
  it, the bytes DCP's planner pickled, under a ``$pickle`` tag read back
  only by baton.dcp.safe_unpickle (what torch.load(weights_only=True) reads).
- ``dcp_view``: BatonReader's side. A decoded tree (restore_match.decode_tree)
  becomes DCP's Metadata, flattened by DCP's own rule
  (torch.distributed.checkpoint._traverse: dicts always, lists that hold a
  tensor or a dict, keys as str, fqn = the path joined with '.'; an object's
  state dict in place of the object; per-rank entries are not DCP's), with
  ``storage_data`` naming each chunk's array and ``planner_data`` each fqn's
  path, so DCP's planners (the program's, or the empty-state-dict one of
  ``baton ckpt export``) plan on it as on their own.
"""
import base64

from baton import metadata
from baton.names import array_name
from baton.dtensor_chunks import chunk_name


# --------------------------------------------------------------------------------------------- writing

class Chunk:
    """One WriteItem of DCP's global plan: the baton array it becomes and where it sits in the tree."""

    __slots__ = ("fqn", "path", "name", "offsets", "sizes", "global_shape", "dtype", "shard")

    def __init__(self, fqn, path, offsets, sizes, global_shape, dtype, shard):
        self.fqn, self.path = fqn, tuple(path)
        self.offsets = tuple(int(o) for o in offsets)
        self.sizes = tuple(int(s) for s in sizes)
        self.global_shape = tuple(int(s) for s in global_shape)
        self.dtype, self.shard = dtype, shard
        # The one naming rule: a tensor saved whole is its path's name, a DTensor's box the path's name and its
        # offsets (the names the Checkpointer gives the same leaves).
        self.name = chunk_name(self.path, self.offsets) if shard else array_name(self.path)


def path_of(fqn, mappings):
    """The state-dict path of a DCP fqn: the planner's mapping, else the fqn as one key (flatten_state_dict=False)."""
    path = mappings.get(fqn) if isinstance(mappings, dict) else None
    return tuple(path) if path else (fqn,)


def encode_value(path, obj, pickled):
    """The tree node of a non-tensor value: its JSON, or ``pickled()`` (DCP's bytes of it) under ``$pickle``."""
    def refuse(value, at):
        raise TypeError(f"not JSON: {type(value).__name__} at '{metadata.path_text(at)}'")

    try:
        return metadata.encode(obj, path, refuse)
    except TypeError:
        return metadata.pickled_node(pickled())


def tree_of_plan(chunks, values):
    """The state-dict tree (JSON-able) of a DCP save: ``chunks`` (Chunk, every rank's), ``values`` {path: node}."""
    by_fqn = {}
    for c in chunks:
        by_fqn.setdefault(c.fqn, []).append(c)
    leaves = {}
    for fqn, cs in by_fqn.items():
        first = cs[0]
        node = {metadata.ARRAY: first.name, "lib": "torch", "dtype": str(first.dtype).replace("torch.", ""),
                "shape": list(first.global_shape), "sharded": first.shard}
        if first.shard:
            cs = sorted(cs, key=lambda c: c.offsets)
            node["dtensor"] = {"placements": [], "mesh": [],
                               "chunks": [[c.name, list(c.offsets), list(c.sizes)] for c in cs]}
        leaves[first.path] = node
    leaves.update(values)
    return _nest(leaves)


class _Leaf:
    __slots__ = ("node",)

    def __init__(self, node):
        self.node = node


def _nest(leaves):
    """{path: node} as nested JSON: int keys under a parent whose keys are all 0..n-1 ints make a list."""
    root = {}
    for path, node in leaves.items():
        if not path:
            raise ValueError("baton: a DCP entry with an empty path")
        here = root
        for key in path[:-1]:
            here = here.setdefault(key, {})
            if not isinstance(here, dict):
                raise ValueError(f"baton: DCP entry '{metadata.path_text(path)}' lies under another entry")
        here[path[-1]] = _Leaf(node)

    def fix(node):
        if isinstance(node, _Leaf):
            return node.node
        out = {k: fix(v) for k, v in node.items()}
        if out and all(type(k) is int for k in out) and sorted(out) == list(range(len(out))):
            return [out[i] for i in range(len(out))]
        if all(type(k) is str and not k.startswith("$") for k in out):
            return out
        return {"$dict": [[k, v] for k, v in out.items()], "ordered": False}

    return fix(root)


# --------------------------------------------------------------------------------------------- reading

def decode_pickle(node, path):
    """The value under a ``$pickle`` tag, read by safe_unpickle (never code)."""
    from baton.dcp import safe_unpickle

    text = node.get(metadata.PICKLE)
    if not isinstance(text, str):
        raise metadata.FormatError(f"'{metadata.path_text(path)}': malformed {metadata.PICKLE}")
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError as e:
        raise metadata.FormatError(f"'{metadata.path_text(path)}': malformed {metadata.PICKLE}: {e}") from None
    return safe_unpickle.torch_object(raw, f"the value at '{metadata.path_text(path)}' (a bytes entry of DCP's)")


class View:
    """The DCP Metadata of a tree, and the values its bytes entries hold (by fqn)."""

    def __init__(self, md, values):
        self.metadata, self.values = md, values


def dcp_view(tree, arrays):
    """``View`` of a decoded tree; ``arrays``: the version's {name: {"dtype", "shape", ...}} (checked against)."""
    import torch
    from torch.distributed.checkpoint.metadata import (BytesStorageMetadata, ChunkStorageMetadata, Metadata,
                                                       MetadataIndex, TensorProperties, TensorStorageMetadata)
    from baton.restore_match import ArrayNode, ObjectNode, PerRankNode

    sd_md, storage, planner_data, values = {}, {}, {}, {}

    def terminal(value):
        if isinstance(value, (dict, ObjectNode)):
            return False
        if not isinstance(value, list):
            return True
        return not any(isinstance(v, ArrayNode) or (isinstance(v, (dict, list, ObjectNode)) and not terminal(v))
                       for v in value)

    def visit(path, node):
        if isinstance(node, ObjectNode):
            return visit(path, node.state)
        if isinstance(node, PerRankNode):
            return None
        if isinstance(node, dict):
            for k, v in node.items():
                visit(path + (str(k),), v)
            return None
        if isinstance(node, list) and not terminal(node):
            for i, v in enumerate(node):
                visit(path + (i,), v)
            return None
        fqn = ".".join(map(str, path))
        planner_data[fqn] = path
        if isinstance(node, ArrayNode):
            dtype = _torch_dtype(torch, node)
            shape = [int(n) for n in node.shape]
            boxes = node.dtensor["chunks"] if node.dtensor is not None else [[node.name, [0] * len(shape), shape]]
            chunks = []
            for name, offsets, sizes in boxes:
                if name not in arrays:
                    raise metadata.FormatError(f"'{metadata.path_text(path)}': array {name!r} is named in the "
                                               "checkpoint's tree but not in its arrays")
                chunks.append(ChunkStorageMetadata(torch.Size(offsets), torch.Size(sizes)))
                storage[MetadataIndex(fqn, torch.Size(offsets))] = name
            sd_md[fqn] = TensorStorageMetadata(properties=TensorProperties(dtype=dtype), size=torch.Size(shape),
                                               chunks=chunks)
        else:
            sd_md[fqn] = BytesStorageMetadata()
            values[fqn] = node
        return None

    if not isinstance(tree, dict):
        raise metadata.FormatError("the checkpoint's state is not a dict")
    visit((), tree)
    return View(Metadata(state_dict_metadata=sd_md, planner_data=planner_data, storage_data=storage), values)


def _torch_dtype(torch, node):
    if node.lib == "numpy":
        import numpy as np
        return torch.from_numpy(np.empty(0, dtype=np.dtype(node.dtype))).dtype
    dtype = getattr(torch, node.dtype, None)
    if not isinstance(dtype, torch.dtype):
        raise metadata.FormatError(f"array {node.name!r}: dtype {node.dtype!r} is not torch's")
    return dtype
