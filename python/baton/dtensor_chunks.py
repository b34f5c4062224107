"""A DTensor leaf as baton arrays: one array per distinct chunk of its layout, each written by one owner.

A DTensor (FSDP2's ``fully_shard``, tensor parallelism, a 2-D mesh) is a
global tensor of which each rank of its device mesh holds one box (its
local shard: offsets and sizes in every dim). Boxes of ranks that differ
only along a Replicate() mesh dim are the same box. Saved (``Layout``):

- every distinct, non-empty box is one baton array, named after the leaf
  and the box's offsets (``chunk_name``), of the box's shape;
- its owner is the lowest global rank that holds it (the same on every
  rank: the boxes are computed from the global shape, the placements and
  the mesh, which the ranks agree on before any collective, see
  state_walk.PlanItem.agreed); the owner registers its local tensor, every
  other rank the same array with no rows, so one collective save writes
  each box once in total, from the rank that has it (the form
  baton.dcp.BatonWriter stores DCP's chunks in).

Restored (``Reads``), at any mesh and world size: the rank's new box is
matched against the saved boxes with DCP's own resharding helper
(``create_read_items_for_chunk_list``); each saved array is registered with
the rows of dim 0 this rank's pieces of it need (none for most), so the
collective restore reads only those rows (whole HDF5 chunks, each verified),
as baton.dcp.BatonReader reads; then the pieces are copied into the local
shard.

Placements: Shard(d) and Replicate() on any number of mesh dims. Partial()
(a pending reduction: no rank holds the value) and _StridedShard (FSDP2
beside tensor parallelism on the same dim: a rank's rows are not one box)
are refused with a TypeError naming the path and the placement, before the
ranks agree on the plan, so every rank raises and none waits.
"""

import functools
import hashlib
import sys
import weakref

import numpy as np

from baton.metadata import path_text
from baton.names import MAX_BYTES, array_name

# Between a leaf's array name and a box's offsets. '~' is escaped in every
# key (names.py), so it appears unescaped only here and in a long name's
# hash suffix ('~' and hex digits, never '@'): no leaf's name is a chunk's.
_CHUNK = "~@"


def is_dtensor(value):
    """Whether ``value`` is a DTensor (never imports torch.distributed for the question)."""
    module = sys.modules.get("torch.distributed.tensor")
    cls = getattr(module, "DTensor", None) if module is not None else None
    return cls is not None and isinstance(value, cls)


def local_tensor(dt):
    """The DTensor's local shard itself (the same memory; no autograd view)."""
    torch = sys.modules["torch"]
    with torch.no_grad():
        return dt.to_local()


def chunk_name(path, offsets):
    """The baton array of the box at ``offsets`` of the DTensor at ``path``."""
    name = array_name(path) + _CHUNK + ",".join(str(int(o)) for o in offsets)
    if len(name.encode("utf-8")) <= MAX_BYTES:
        return name
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]
    head = name.encode("utf-8")[:200].decode("utf-8", errors="ignore")
    return f"{head}~{digest}"


def placement_text(placement, path):
    """'S(d)' or 'R'; TypeError naming the path and the placement for any other kind."""
    tensor_module = sys.modules["torch.distributed.tensor"]
    if type(placement) is tensor_module.Shard:
        return f"S({placement.dim})"
    if type(placement) is tensor_module.Replicate:
        return "R"
    if isinstance(placement, tensor_module.Partial):
        why = ("a Partial() placement holds a pending reduction, not the value: redistribute the DTensor "
               "to Replicate() or Shard() before saving")
    else:
        why = ("baton.Checkpointer keeps Shard(d) and Replicate() placements (a _StridedShard's rows are not "
               "one box: save that state through torch.distributed.checkpoint with baton.dcp.BatonWriter)")
    raise TypeError(f"baton: cannot keep '{path_text(path)}': a DTensor with placement {placement!r}: {why}")


class Chunk:
    """One saved box: its array name, offsets, sizes and owner (a global rank)."""

    __slots__ = ("name", "offsets", "sizes", "owner")

    def __init__(self, name, offsets, sizes, owner):
        self.name, self.offsets, self.sizes, self.owner = name, tuple(offsets), tuple(sizes), owner

    @property
    def array_shape(self):
        """The baton array's shape: the box's, (1,) for a 0-d tensor (baton's sharded arrays have a dim 0)."""
        return self.sizes or (1,)


# A DeviceMesh's ranks by mesh: torch computes mesh.mesh anew at every access (its layout
# remapped to a tensor), 1,020 times in a restore of the 1 GiB FSDP2 state (0.24 s of 2.0 s
# under cProfile, 2026-12-06). Weak keys: a mesh the program drops leaves the cache with it.
_MESH_RANKS = weakref.WeakKeyDictionary()


def mesh_ranks(mesh):
    """The world ranks of ``mesh`` in its order (mesh.mesh flattened), computed once per mesh."""
    try:
        return _MESH_RANKS[mesh]
    except (KeyError, TypeError):  # TypeError: a mesh that cannot be weakly referenced or hashed
        pass
    ranks = tuple(int(r) for r in mesh.mesh.flatten().tolist())
    try:
        _MESH_RANKS[mesh] = ranks
    except TypeError:
        pass
    return ranks


class Layout:
    """A DTensor's placements, mesh and saved boxes, the same on every rank.

    ``text``: what the ranks agree on (placements, mesh shape, the mesh's
    ranks); ``chunks``: the distinct non-empty boxes in offset order;
    ``mine``: the box this rank holds (None when it holds none).
    """

    def __init__(self, dt, path):
        self.placements = tuple(placement_text(p, path) for p in dt.placements)
        mesh = dt.device_mesh
        self.mesh_shape = tuple(int(n) for n in mesh.shape)
        self.mesh_ranks = mesh_ranks(mesh)
        self.global_shape = tuple(int(n) for n in dt.shape)
        self.text = (f"placements ({', '.join(self.placements)}) on a mesh of {'x'.join(map(str, self.mesh_shape))} "
                     f"(ranks {list(self.mesh_ranks)})")
        boxes = _boxes(self.global_shape, self.mesh_shape, self.mesh_ranks, tuple(dt.placements))
        self.chunks = [Chunk(chunk_name(path, off), off, sizes, owner) for (off, sizes), owner in boxes]
        self.rank = sys.modules["torch.distributed"].get_rank()
        self.mine = None
        coordinate = mesh.get_coordinate()  # None: this rank is not in the mesh (it holds no box)
        if coordinate is not None:
            sizes, offsets = _box(self.global_shape, self.mesh_shape, tuple(int(c) for c in coordinate),
                                  tuple(dt.placements))
            shape = tuple(local_tensor(dt).shape)
            if shape != sizes:
                raise ValueError(f"baton: '{path_text(path)}': the DTensor's local shard has shape {shape}, "
                                 f"its {self.text} give rank {self.rank} a box of {sizes}")
            self.mine = next((c for c in self.chunks if c.offsets == offsets and c.sizes == sizes), None)

    def ref(self):
        """The layout in the checkpoint's tree (restore_match.ArrayNode reads it)."""
        return {"placements": list(self.placements), "mesh": list(self.mesh_shape),
                "chunks": [[c.name, list(c.offsets), list(c.sizes)] for c in self.chunks]}


def _box(global_shape, mesh_shape, coordinate, placements):
    """(sizes, offsets) of the box at mesh ``coordinate``: each Shard(d) splits dim d of what the mesh dims before
    it left, as torch.chunk does (pieces of ceil(n / parts), the last ones shorter or empty); Replicate() splits
    nothing. torch's own helper for any coordinate (_compute_local_shape_and_global_offset) is private and
    missing from torch 2.5; Layout checks the result against the rank's own local shard."""
    shard = sys.modules["torch.distributed.tensor"].Shard
    sizes, offsets = list(global_shape), [0] * len(global_shape)
    for mesh_dim, placement in enumerate(placements):
        if type(placement) is not shard:
            continue
        d = placement.dim % len(sizes)
        parts, k = mesh_shape[mesh_dim], coordinate[mesh_dim]
        full = -(-sizes[d] // parts)
        start = min(k * full, sizes[d])
        end = min(start + full, sizes[d])
        offsets[d] += start
        sizes[d] = end - start
    return tuple(int(s) for s in sizes), tuple(int(o) for o in offsets)


@functools.lru_cache(maxsize=4096)
def _boxes(global_shape, mesh_shape, mesh_ranks, placements):
    """[((offsets, sizes), owner)] of the distinct non-empty boxes, in offset order (cached: FSDP2's
    parameters and their optimizer state share few shapes)."""
    owners = {}
    for idx, rank in enumerate(mesh_ranks):
        coord = tuple(int(c) for c in np.unravel_index(idx, mesh_shape))
        sizes, offsets = _box(global_shape, mesh_shape, coord, placements)
        if 0 in sizes:
            continue  # an uneven split leaves the last ranks nothing
        key = (offsets, sizes)
        owners[key] = min(owners.get(key, rank), rank)
    return sorted(owners.items())


class Reads:
    """What a restore reads of a saved DTensor into the live one at ``path`` (or into a whole tensor; or of a
    tensor saved whole, one box, into a DTensor).

    ``saved_chunks``: the checkpoint's boxes ([array name, offsets, sizes],
    ArrayNode.dtensor["chunks"]); ``live``: the state's DTensor (its own
    mesh and placements). ``buffers``: per saved box, (its Chunk, a tensor
    for the rows read, the first row), every saved box listed (the restore
    registers the same arrays on every rank; most with no rows). ``copy()``
    puts the pieces into the live local shard once the restore verified
    them.
    """

    def __init__(self, path, saved_chunks, live):
        torch = sys.modules["torch"]
        from torch.distributed.checkpoint.metadata import ChunkStorageMetadata, TensorProperties, TensorStorageMetadata
        from torch.distributed.checkpoint.planner_helpers import create_read_items_for_chunk_list

        self.path = path
        if is_dtensor(live):
            for p in live.placements:
                placement_text(p, path)
            self.local = local_tensor(live)
            sizes, offsets = _live_box(live)
        else:  # a whole tensor (every rank's copy): its box is all of it
            self.local = live
            sizes, offsets = tuple(int(n) for n in live.shape), (0,) * live.dim()
        self.chunks = [Chunk(name, off, sizes, None) for name, off, sizes in saved_chunks]
        global_shape = tuple(int(n) for n in live.shape)
        self.items = []
        self.in_place = set()  # saved boxes read straight into self.local (into_local)
        if self.local.numel() > 0 and self.chunks:
            md = TensorStorageMetadata(properties=TensorProperties(dtype=self.local.dtype),
                                       size=torch.Size(global_shape),
                                       chunks=[ChunkStorageMetadata(torch.Size(c.offsets), torch.Size(c.sizes))
                                               for c in self.chunks])
            mine = ChunkStorageMetadata(torch.Size(offsets), torch.Size(sizes))
            self.items = create_read_items_for_chunk_list(array_name(path), md, [mine])
        by_chunk = {}
        for item in self.items:
            by_chunk.setdefault(item.storage_index.index, []).append(item)
        self.buffers = []
        for idx, c in enumerate(self.chunks):
            first, end = row_span(by_chunk[idx]) if idx in by_chunk else (0, 0)
            shape = c.array_shape
            self.buffers.append((c, torch.empty((end - first,) + shape[1:], dtype=self.local.dtype), first))
        covered = sum(int(np.prod([int(n) for n in item.lengths])) for item in self.items)
        if covered != self.local.numel():
            raise ValueError(f"baton: '{path_text(path)}': the checkpoint's chunks cover {covered} of the "
                             f"{self.local.numel()} elements of this rank's shard")

    def into_local(self):
        """Reads the saved boxes that are whole rows of the live local shard straight into it.

        Only for a restore that writes nothing before every rank verified
        every byte (ArrayCheckpointer.restore(verify_before_write=True)): a
        saved chunk needed by one ReadItem whose rows are whole rows of the
        shard (the same world size and sharding: every box) gets the shard's
        own rows, a contiguous view, as its buffer, and copy() leaves it.
        """
        from torch.distributed._shard._utils import narrow_tensor_by_index
        if not self.local.is_contiguous() or self.local.dim() == 0:
            return
        by_chunk = {}
        for item in self.items:
            by_chunk.setdefault(item.storage_index.index, []).append(item)
        for idx, items in by_chunk.items():
            c, buf, first = self.buffers[idx]
            item = items[0]
            whole_rows = (len(items) == 1 and tuple(int(n) for n in item.lengths[1:]) == tuple(self.local.shape[1:])
                          and not any(int(o) for o in item.dest_offsets[1:]))
            if whole_rows and tuple(buf.shape) == tuple(int(n) for n in item.lengths):
                self.buffers[idx] = (c, narrow_tensor_by_index(self.local, item.dest_offsets, item.lengths), first)
                self.in_place.add(idx)

    def copy(self):
        """The pieces read, into the live local shard (after the restore verified them)."""
        from torch.distributed._shard._utils import narrow_tensor_by_index
        torch = sys.modules["torch"]
        in_place = self.in_place
        if in_place:  # written by the extension: the autograd version counter moves as copy_ moves it
            torch.autograd.graph.increment_version(self.local)
        with torch.no_grad():
            for item in self.items:
                if item.storage_index.index in in_place:
                    continue
                _, buf, first = self.buffers[item.storage_index.index]
                dest = self.local
                if item.lengths:
                    dest = narrow_tensor_by_index(self.local, item.dest_offsets, item.lengths)
                dest.copy_(stored_piece(buf, first, item))


# The two steps of a partial read that baton.dcp.BatonReader shares: which
# rows of a saved chunk's array a rank registers for its ReadItems, and the
# piece of one ReadItem in the rows read.

def row_span(items):
    """(first, end): the rows of dim 0 of one saved chunk that DCP ReadItems need ((0, 1) for a 0-d one)."""
    if not items[0].lengths:
        return 0, 1
    first = min(int(i.storage_offsets[0]) for i in items)
    end = max(int(i.storage_offsets[0]) + int(i.lengths[0]) for i in items)
    return first, end


def stored_piece(buf, first, item):
    """The piece of ``item`` in ``buf``, the rows [first, ...) of its saved chunk (a view; 0-d: the element)."""
    from torch.distributed._shard._utils import narrow_tensor_by_index
    if not item.lengths:
        return buf.reshape(())
    offsets = [int(o) for o in item.storage_offsets]
    offsets[0] -= first
    return narrow_tensor_by_index(buf, offsets, item.lengths)


def _live_box(live):
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
    sizes, offsets = compute_local_shape_and_global_offset(live.shape, live.device_mesh, live.placements)
    sizes = tuple(int(s) for s in sizes)
    return sizes, tuple(int(o) for o in offsets) or (0,) * len(sizes)
