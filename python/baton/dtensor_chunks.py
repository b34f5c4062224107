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
import math
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
    return _long_name(array_name(path) + _CHUNK + ",".join(str(int(o)) for o in offsets))


def _long_name(name):
    """``name``, or, over MAX_BYTES, its first 200 bytes, '~' and 16 hex digits of its SHA-256 (as names.py does)."""
    if len(name) * 4 <= MAX_BYTES:  # at most 4 bytes of UTF-8 a character
        return name
    raw = name.encode("utf-8")
    if len(raw) <= MAX_BYTES:
        return name
    digest = hashlib.sha256(raw).hexdigest()[:16]
    head = raw[:200].decode("utf-8", errors="ignore")
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


class _MeshLayout:
    """What a Layout holds apart from its path: the same for every DTensor of one global shape, placements and mesh
    (FSDP2's parameters and their optimizer state share few), so computed once per (mesh, shape, placements).

    Computing it per leaf (the placements' text, mesh.shape, the mesh's
    coordinate, the rank, the boxes) was 0.04 s of a 0.1 s profiled save of the 256 MiB FSDP2 state (210 DTensor
    leaves, cProfile, 2026-12-06): cached in _LAYOUTS by the mesh (weakly) and by everything else it depends on.
    """

    __slots__ = ("placements", "mesh_shape", "mesh_ranks", "global_shape", "text", "boxes", "rank", "my_box")

    def __init__(self, global_shape, placements, mesh, path):
        self.placements = tuple(placement_text(p, path) for p in placements)
        self.mesh_shape = tuple(int(n) for n in mesh.shape)
        self.mesh_ranks = mesh_ranks(mesh)
        self.global_shape = global_shape
        self.text = (f"placements ({', '.join(self.placements)}) on a mesh of {'x'.join(map(str, self.mesh_shape))} "
                     f"(ranks {list(self.mesh_ranks)})")
        # (offsets, sizes, owner, offsets' text) of each distinct non-empty box
        self.boxes = tuple((off, sizes, owner, ",".join(str(int(o)) for o in off))
                           for (off, sizes), owner in _boxes(global_shape, self.mesh_shape, self.mesh_ranks, placements))
        self.rank = sys.modules["torch.distributed"].get_rank()
        coordinate = mesh.get_coordinate()  # None: this rank is not in the mesh (it holds no box)
        self.my_box = None if coordinate is None else _box(global_shape, self.mesh_shape,
                                                           tuple(int(c) for c in coordinate), placements)


# mesh -> {(global shape, placements): _MeshLayout}. Weak keys: a mesh the program drops leaves with its entries.
_LAYOUTS = weakref.WeakKeyDictionary()


def mesh_layout(dt, path):
    """The _MeshLayout of DTensor ``dt`` (cached; TypeError naming ``path`` for a placement baton does not keep)."""
    mesh, placements = dt.device_mesh, tuple(dt.placements)
    # The placements' types too: a placement may compare equal to another kind's (a Shard(0) and a
    # _StridedShard of dim 0, which baton refuses) where only the kind tells them apart.
    key = (tuple(int(n) for n in dt.shape), placements, tuple(type(p) for p in placements))
    try:
        per_mesh = _LAYOUTS.get(mesh)
    except TypeError:  # a mesh that cannot be weakly referenced or hashed: computed every time
        return _MeshLayout(key[0], placements, mesh, path)
    try:
        found = None if per_mesh is None else per_mesh.get(key)
    except TypeError:  # an unhashable placement
        return _MeshLayout(key[0], placements, mesh, path)
    if found is None:
        found = _MeshLayout(key[0], placements, mesh, path)  # raises for Partial() and _StridedShard: never cached
        if per_mesh is None:
            per_mesh = _LAYOUTS.setdefault(mesh, {})
        per_mesh[key] = found
    return found


class Layout:
    """A DTensor's placements, mesh and saved boxes, the same on every rank.

    ``text``: what the ranks agree on (placements, mesh shape, the mesh's
    ranks); ``chunks``: the distinct non-empty boxes in offset order;
    ``mine``: the box this rank holds (None when it holds none).
    ``local``: the DTensor's local shard, when the caller has it already.
    """

    def __init__(self, dt, path, local=None, name=None):
        m = mesh_layout(dt, path)
        self.placements, self.mesh_shape, self.mesh_ranks = m.placements, m.mesh_shape, m.mesh_ranks
        self.global_shape, self.text, self.rank = m.global_shape, m.text, m.rank
        prefix = (array_name(path) if name is None else name) + _CHUNK
        self.chunks = [Chunk(_long_name(prefix + text), off, sizes, owner) for off, sizes, owner, text in m.boxes]
        self.mine = None
        self.my_box = m.my_box  # (sizes, offsets) of this rank's box, empty ones too; None: not in the mesh
        if m.my_box is not None:
            sizes, offsets = m.my_box
            shape = tuple((local_tensor(dt) if local is None else local).shape)
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

    def __init__(self, path, saved_chunks, live, box=None):
        """``box``: (sizes, offsets) of this rank's box of ``live`` where the walk computed it (Layout.my_box)."""
        torch = sys.modules["torch"]
        self.path = path
        if is_dtensor(live):
            if box is None:
                for p in live.placements:
                    placement_text(p, path)
                box = _live_box(live)
            self.local = local_tensor(live)
        else:  # a whole tensor (every rank's copy): its box is all of it
            self.local = live
            box = tuple(int(n) for n in live.shape), (0,) * live.dim()
        self.chunks = [Chunk(name, off, sizes, None) for name, off, sizes in saved_chunks]
        self.items, spans, covered = (), {}, 0
        self.in_place = set()  # saved boxes read straight into self.local (into_local)
        if self.local.numel() > 0 and self.chunks:
            self.items, spans, covered = _pieces(tuple(int(n) for n in live.shape),
                                                 tuple((c.offsets, c.sizes) for c in self.chunks), box)
        self.buffers = []
        for idx, c in enumerate(self.chunks):
            first, end = spans.get(idx, (0, 0))
            shape = c.array_shape
            self.buffers.append((c, torch.empty((end - first,) + shape[1:], dtype=self.local.dtype,
                                                 device="cpu"), first))
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
        Only host memory: the extension writes host memory, and a shard on
        another device (a GPU's) registered in place would be read into the
        host mirror tensors.Binding makes of it, which nothing copies back
        (copy() leaves the boxes read in place); such a shard keeps its host
        buffers, which copy() moves into it.
        """
        from torch.distributed._shard._utils import narrow_tensor_by_index
        if self.local.device.type != "cpu" or not self.local.is_contiguous() or self.local.dim() == 0:
            return
        by_chunk = {}
        for piece in self.items:
            by_chunk.setdefault(piece.index, []).append(piece)
        for idx, items in by_chunk.items():
            c, buf, first = self.buffers[idx]
            item = items[0]
            whole_rows = (len(items) == 1 and tuple(int(n) for n in item.lengths[1:]) == tuple(self.local.shape[1:])
                          and not any(int(o) for o in item.dest_offsets[1:]))
            if whole_rows and tuple(buf.shape) == tuple(int(n) for n in item.lengths):
                self.buffers[idx] = (c, narrow_tensor_by_index(self.local, item.dest_offsets, item.lengths), first)
                self.in_place.add(idx)

    def holds_scratch(self):
        """Whether a saved box is read into memory of its own (not the live shard's rows, not empty)."""
        return any(buf.numel() > 0 for idx, (_, buf, _) in enumerate(self.buffers) if idx not in self.in_place)

    def copy(self):
        """The pieces read, into the live local shard (after the restore verified them)."""
        from torch.distributed._shard._utils import narrow_tensor_by_index
        torch = sys.modules["torch"]
        in_place = self.in_place
        if in_place:  # written by the extension: the autograd version counter moves as copy_ moves it
            torch.autograd.graph.increment_version(self.local)
        with torch.no_grad():
            for piece in self.items:
                if piece.index in in_place:
                    continue
                _, buf, first = self.buffers[piece.index]
                dest = self.local
                if piece.lengths:
                    dest = narrow_tensor_by_index(self.local, piece.dest_offsets, piece.lengths)
                dest.copy_(stored_piece(buf, first, piece))


class _Piece:
    """One piece of a read: of saved box ``index``, ``lengths`` elements from ``storage_offsets`` in it to
    ``dest_offsets`` in the rank's box (a DCP ReadItem's fields, as row_span and stored_piece read them)."""

    __slots__ = ("index", "dest_offsets", "storage_offsets", "lengths")

    def __init__(self, item):
        self.index = item.storage_index.index
        self.dest_offsets = tuple(int(o) for o in item.dest_offsets)
        self.storage_offsets = tuple(int(o) for o in item.storage_offsets)
        self.lengths = tuple(int(n) for n in item.lengths)


@functools.lru_cache(maxsize=4096)
def _pieces(global_shape, saved_boxes, box):
    """(pieces, {saved box index: (first, end) rows read}, elements covered) of reading the saved boxes
    ((offsets, sizes) each) into this rank's ``box`` ((sizes, offsets)), by DCP's own resharding helper.

    Cached: a function of its arguments alone (no name, no dtype), and FSDP2's leaves share few shapes; DCP's
    helper and its metadata objects per leaf were 0.02 s of a 0.16 s profiled match of the 256 MiB FSDP2
    state (210 DTensor leaves, cProfile, 2026-12-06)."""
    torch = sys.modules["torch"]
    from torch.distributed.checkpoint.metadata import ChunkStorageMetadata, TensorProperties, TensorStorageMetadata
    from torch.distributed.checkpoint.planner_helpers import create_read_items_for_chunk_list

    sizes, offsets = box
    md = TensorStorageMetadata(properties=TensorProperties(dtype=torch.float32), size=torch.Size(global_shape),
                               chunks=[ChunkStorageMetadata(torch.Size(off), torch.Size(sz))
                                       for off, sz in saved_boxes])
    mine = ChunkStorageMetadata(torch.Size(offsets), torch.Size(sizes))
    pieces = tuple(_Piece(item) for item in create_read_items_for_chunk_list("box", md, [mine]))
    by_box = {}
    for piece in pieces:
        by_box.setdefault(piece.index, []).append(piece)
    spans = {idx: row_span(items) for idx, items in by_box.items()}
    return pieces, spans, sum(math.prod(p.lengths) for p in pieces)


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
