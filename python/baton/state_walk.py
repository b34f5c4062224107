"""The one walk of a state dict: the local plan of a save or a restore.

``walk(state)`` goes once through the program's state dict (the dict given
to Checkpointer.save or restore), with the rules below, and returns the
rank's LocalPlan:

- ``items``: every array leaf by baton array name (names.py), as a PlanItem:
  its path, kind, library, dtype, local and global shape, and the value;
- ``tree``: the JSON-able skeleton of the whole state, job-wide: plain values
  as metadata.encode writes them, each array as a reference
  ``{"$array": name, ...}`` (its library, dtype and global shape, so that a
  restore can allocate what the state lacks), each object walked through
  ``state_dict()`` as ``{"$object": type, "module": bool, "state": ...}``,
  each per-rank object (RNGState, PerRank) as ``{"$per_rank": key}``;
- ``per_rank``: this rank's per-rank entries by key, encoded the same way;
- ``state_dicts``: each object's state dict as this walk got it, by path
  (restore_match walks the checkpoint beside these, calling no
  ``state_dict()`` again).

The kinds (``classify``), what every rank must hold equal of each
(``PlanItem.agreed``), and the plan's digest are the plan the ranks agree on
(checkpointer.py) before any other collective step. A leaf kind is added in
three places here: a KIND, its case in ``classify`` and ``PlanItem.__init__``
(what it records), and its fields in ``PlanItem.agreed`` (what the ranks
must agree on); then ``PlanItem.registrations`` says which baton arrays it
is saved as (checkpointer.py's ``_bind`` registers them). The DTensor kind
is the example: it records its Layout (dtensor_chunks.py: the placements,
the mesh and every rank's box, computed alike on every rank), agrees on the
layout's text, and is saved as one array per distinct box.
"""

import hashlib

from baton import dtensor_chunks, metadata, tensors
from baton.metadata import path_text
from baton.names import array_name
from baton.wrappers import Sharded, is_per_rank

# The kinds of a state dict's leaves.
REPLICATED = "replicated"  # a tensor or NumPy array every rank holds the same (DDP's parameters)
SHARDED = "sharded"        # baton.Sharded: this rank's dim-0 rows of an array
PER_RANK = "per_rank"      # RNGState, PerRank: JSON values of this rank's own
DTENSOR = "dtensor"        # torch.distributed.tensor.DTensor: one box per rank of its mesh (dtensor_chunks.py)
OBJECT = "object"          # state_dict()/load_state_dict(): walked through its state dict
VALUE = "value"            # everything else: a plain value or container (job-wide JSON), or unkeepable
ARRAY_KINDS = (REPLICATED, SHARDED, DTENSOR)


def has_state_dict(value):
    return (not isinstance(value, dict) and callable(getattr(value, "state_dict", None)) and
            callable(getattr(value, "load_state_dict", None)))


def classify(value):
    """The kind of a leaf, by the rules every walk uses (save, restore, the match)."""
    if isinstance(value, Sharded):
        return SHARDED
    if dtensor_chunks.is_dtensor(value):
        return DTENSOR
    if tensors.is_array(value):
        return REPLICATED
    if is_per_rank(value):
        return PER_RANK
    if has_state_dict(value):
        return OBJECT
    return VALUE


class PlanItem:
    """An array leaf of the state, as saved or restored."""

    __slots__ = ("name", "path", "kind", "leaf", "value", "offset", "shape", "global_shape", "lib", "dtype",
                 "baton_dtype", "layout", "logical_shape", "signature", "_ref", "_agreed")

    def __init__(self, path, leaf, kind=None, local=None):
        """``local``: a DTensor's local shard, where the caller has it already."""
        kind = kind or classify(leaf)
        self.name = array_name(path)
        self.path = path
        self.kind = kind
        self.leaf = leaf  # the state's own object (a restore's target is the walk's item when it is this)
        self.layout = None
        shard = None
        if kind == DTENSOR:
            self.value = shard = dtensor_chunks.local_tensor(leaf) if local is None else local
            self.layout = dtensor_chunks.Layout(leaf, path, self.value, self.name)
            self.offset = 0
            self.global_shape = self.layout.global_shape
        elif kind == SHARDED:
            self.value = leaf.tensor  # the tensor or array itself
            self.offset = leaf.offset
            self.global_shape = tuple(leaf.global_shape)
        elif kind == REPLICATED:
            self.value = leaf
            self.offset = 0
            self.global_shape = tuple(leaf.shape)
        else:
            raise ValueError(f"baton: '{path_text(path)}': a {kind} is not an array leaf")
        self.lib, self.dtype, self.baton_dtype = tensors.describe(self.value, path)
        self.logical_shape = tuple(self.global_shape)  # the tree's (DCP's) shape: the tensor's own
        if self.lib == "torch" and tensors.is_reinterpreted(self.value.dtype):
            # One stored form with BatonWriter's (tensors.stored_view): the same bytes, another dtype's name.
            self.value = tensors.stored_view(self.value)
            self.global_shape = tensors.stored_shape(self.global_shape, self.dtype)
        self.shape = tuple(self.value.shape)
        # What a later walk checks to take this item again for a leaf at its path: a plain tensor's memory
        # and whole description, where the item's value is the leaf itself; a DTensor's local shard's, its
        # mesh, placements and global shape, where the item's value is that shard itself (a view, as of a
        # reinterpreted dtype, is not reused). None: never reused.
        self.signature = None
        if kind == REPLICATED and self.value is leaf:
            self.signature = _signature(leaf)
        elif kind == DTENSOR and self.value is shard:
            self.signature = _dtensor_signature(leaf, shard)
        self._ref = self._agreed = None

    @property
    def identity(self):
        """tensors.identity() of a plain tensor's value as this walk took it (part of the signature); None
        for what is never reused and for a DTensor (its registrations are views of its shard)."""
        return self.signature[1] if self.signature is not None and self.kind == REPLICATED else None

    @property
    def sharded(self):
        return self.kind == SHARDED

    def ref(self):
        """The leaf's node in the job-wide tree (a DTensor's with its layout: the saved boxes' arrays).

        Made once per item (a reused item gives the same node again): nothing changes a tree's nodes."""
        if self._ref is None:
            node = {metadata.ARRAY: self.name, "lib": self.lib, "dtype": self.dtype,
                    "shape": list(self.logical_shape), "sharded": self.kind != REPLICATED}
            if self.layout is not None:
                node["dtensor"] = self.layout.ref()
            self._ref = node
        return self._ref

    def agreed(self):
        """What every rank must hold equal: the name (and path), kind, dtype and global shape (not a shard's rows);
        a DTensor's placements and mesh too (every rank derives the same boxes and owners from them)."""
        if self._agreed is None:
            fields = [self.name, path_text(self.path), self.kind, self.baton_dtype, list(self.global_shape)]
            if self.layout is not None:
                fields.append(self.layout.text)
            self._agreed = fields
        return self._agreed

    def registrations(self):
        """The baton arrays this leaf is saved as: (name, tensor or None, offset, global shape); None: replicated.

        A DTensor's boxes: this rank's local tensor for the box it owns, an
        empty one (``tensor`` None: no rows) for every other box.
        """
        if self.kind == REPLICATED:
            return [(self.name, self.value, None, None)]
        if self.kind == SHARDED:
            return [(self.name, self.value, self.offset, self.global_shape)]
        mine = self.layout.mine
        pairs = self.global_shape[len(self.logical_shape):]  # a complex box's stored last dim (2,), else ()
        return [(c.name, self.value.reshape(c.array_shape + pairs) if mine is c and c.owner == self.layout.rank
                 else None, 0, c.array_shape + pairs) for c in self.layout.chunks]

    def array_names(self):
        return [c.name for c in self.layout.chunks] if self.kind == DTENSOR else [self.name]


class LocalPlan:
    """One rank's plan: its leaves, its per-rank state, the job-wide tree."""

    def __init__(self):
        self.items = {}        # array name -> PlanItem, in walk order
        self.by_path = {}      # path -> PlanItem (restore_match finds a live leaf by its path, naming nothing again)
        self.per_rank = {}     # key -> encoded state
        self.state_dicts = {}  # path -> an object's state dict, as the walk got it
        self.tree = None
        self.reused = 0  # items taken from the previous walk (walk(previous=))
        # The SHA-256 state after the agreed document's first part, the arrays' (agreed_json), and its bytes.
        self._arrays_head = None

    def array_names(self):
        """Every baton array this plan registers (a DTensor's boxes, each leaf's own name otherwise)."""
        return {n for item in self.items.values() for n in item.array_names()}

    def agreed(self, call):
        """The JSON-able part every rank must hold equal, ``call`` (the call and its arguments) first."""
        return {"call": call, "arrays": sorted(i.agreed() for i in self.items.values()),
                "per_rank": sorted(self.per_rank)}

    def agreed_json(self, call, **more):
        """(bytes, SHA-256) of what every rank must hold equal: agreed(call) with ``more``, the arrays first.

        The bytes plan_agreement.agree exchanges where the ranks' digests
        differ; the digest is of them. The arrays' part (sorted, encoded and
        hashed: 3.7 ms of a 44 ms save_async call of 5,000 tensors at 2 ranks)
        is taken from the previous walk's plan where this walk took every
        item from it (walk(previous=)): the same items, the same part.
        """
        if self._arrays_head is None:
            head = b'{"arrays":' + metadata.dumps(sorted(i.agreed() for i in self.items.values())) + b","
            self._arrays_head = (head, hashlib.sha256(head))
        head, hashed = self._arrays_head
        rest = metadata.dumps({"call": call, "per_rank": sorted(self.per_rank), **more})[1:]
        hashed = hashed.copy()
        hashed.update(rest)
        return head + rest, hashed.digest()


def _signature(tensor):
    """Everything a PlanItem of a plain tensor rests on: its type, memory and layout (tensors.identity) and
    its torch layout; None for a NumPy array (not reused). Not the object: module.state_dict() makes a new
    detached view of each parameter at every call, and ``tensor.data = ...`` changes an object's tensor."""
    if not tensors.is_tensor(tensor):
        return None
    return (type(tensor), tensors.identity(tensor), tensor.layout)


def _dtensor_signature(dt, local=None):
    """Everything a PlanItem of a DTensor rests on (its Layout, its registrations): its local shard's
    signature and its mesh, placements and global shape; None for what is not a DTensor."""
    if not dtensor_chunks.is_dtensor(dt):
        return None
    local = dtensor_chunks.local_tensor(dt) if local is None else local
    return (_signature(local), type(dt), dt.device_mesh, tuple(dt.placements), tuple(dt.shape))


def walk(state, pickled=None, previous=None):
    """The LocalPlan of ``state``; TypeError naming the path of a leaf that cannot be kept.

    ``state``: a dict, or one object with state_dict()/load_state_dict() (Checkpointer.restore's
    whole-version form: walked as any object, at the path ()).

    ``pickled(value, path)``: the bytes torch.save writes of a value JSON
    cannot hold, kept as a ``$pickle`` node (metadata.PICKLE) where a leaf
    would be refused. Only `baton ckpt import` passes it: a torch.save file's
    values beyond JSON (a torch.Size, a dtype, a set) are what
    torch.load(weights_only=True) read, and safe_unpickle reads them back
    the same way, as it reads DCP's bytes entries. A program's own save
    never pickles.

    ``previous``: the LocalPlan of an earlier walk (a Checkpointer's last
    call): an item of it is taken again for a plain tensor leaf at the same
    path with the same type, memory, shape, strides, dtype and device
    (PlanItem.signature), or a DTensor whose local shard is so and whose
    mesh, placements and global shape are the same, instead of being made
    anew (the naming, classifying and checking of a leaf: a third of a
    5,000-leaf walk; a DTensor's layout too); it then holds this walk's
    leaf object (a restore matches its targets by object). ``previous`` is
    the caller's to drop: its items move here.
    """
    if not isinstance(state, dict) and not has_state_dict(state):
        raise TypeError(f"baton: the state must be a dict of names to modules, optimizers, tensors and "
                        f"values, not a {type(state).__name__}")
    plan = LocalPlan()
    on_stack = set()  # ids of the objects being walked: a state that holds itself is refused

    known = previous.by_path if previous is not None else {}

    def on_other(value, path):
        item = known.get(path)
        if item is not None and item.signature is not None:
            if item.kind == DTENSOR:
                if item.signature == _dtensor_signature(value):
                    item.leaf = value  # its value stays the shard (the same memory: the signature's)
                    plan.reused += 1
                    return _add_item(plan, item)
            elif item.signature == _signature(value):
                item.leaf = item.value = value
                plan.reused += 1
                return _add_item(plan, item)
        kind = classify(value)
        if kind in ARRAY_KINDS:
            local = dtensor_chunks.local_tensor(value) if kind == DTENSOR else None
            tensors.check_keepable(value.tensor if kind == SHARDED else local if kind == DTENSOR else value, path)
            return _add_item(plan, PlanItem(path, value, kind, local))
        if kind == PER_RANK:
            key = array_name(path)
            plan.per_rank[key] = metadata.encode(value.state_dict(), path, _no_arrays)
            return {metadata.PER_RANK: key}
        if kind == OBJECT:
            if id(value) in on_stack:
                raise TypeError(f"baton: cannot keep '{path_text(path)}': the {type(value).__name__} holds "
                                "itself (a state_dict() that contains its own object)")
            on_stack.add(id(value))
            try:
                sd = value.state_dict()
                plan.state_dicts[path] = sd
                node = {metadata.OBJECT: type(value).__qualname__, "module": tensors.is_module(value),
                        "state": metadata.encode(sd, path, on_other)}
            finally:
                on_stack.discard(id(value))
            return node
        if pickled is not None:
            return metadata.pickled_node(pickled(value, path))
        raise metadata.unkeepable(path, value)

    plan.tree = metadata.encode(state, (), on_other)
    if previous is not None and plan.reused == len(plan.items) == len(previous.items):
        plan._arrays_head = previous._arrays_head  # the same items: the same arrays' part of agreed_json
    return plan


def _add_item(plan, item):
    other = plan.items.get(item.name)
    if other is not None:
        raise ValueError(f"baton: '{path_text(other.path)}' and '{path_text(item.path)}' map to the same "
                         f"array name {item.name!r} (keys that differ only in type, such as 0 and '0'?)")
    plan.items[item.name] = item
    plan.by_path[item.path] = item
    return item.ref()


def _no_arrays(value, path):
    if classify(value) in ARRAY_KINDS:
        raise TypeError(f"baton: '{path_text(path)}': per-rank state (RNGState, PerRank) holds JSON values "
                        "only, not tensors (register a per-rank tensor as a baton.Sharded row)")
    raise metadata.unkeepable(path, value)
