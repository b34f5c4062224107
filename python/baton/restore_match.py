"""A checkpoint's state-dict tree matched against the program's live state.

``match(state, local, tree, arrays, strict)`` goes through the decoded
checkpoint tree beside the state dict the program passes to
Checkpointer.restore, as state_walk.walk found it (``local``, the rank's
LocalPlan: the live leaves' kinds, dtypes and shapes and the objects' state
dicts come from that one walk, by its rules; nothing here calls
``state_dict()`` or classifies a leaf again) and says, before anything is
read:

- ``targets``: for each array to restore, the tensor it goes into: the
  program's own (in place), or a new one where the state lacks it inside an
  object that is not a torch module (state torch creates lazily, such as
  Adam's ``exp_avg`` before the first step: the new tensors go to the
  object's ``load_state_dict``);
- ``dtensors``: for each saved DTensor, the rows of each saved box this
  rank reads for the live DTensor's local shard, at its own mesh and
  placements (dtensor_chunks.Reads: the resharding);
- ``errors``: every difference that refuses the restore, naming the path: a
  tensor whose dtype or shape differs, a key the checkpoint lacks or the
  state lacks (strict only), a tensor where the other side holds a value;
- ``actions``: what to run once the arrays are read, children first: plain
  values put into the program's own dicts and lists, ``load_state_dict`` of
  each object with its state dict as the checkpoint has it, the per-rank
  entries.
"""

from baton import dtensor_chunks, metadata, tensors
from baton.errors import with_context
from baton.metadata import path_text
from baton.state_walk import ARRAY_KINDS, DTENSOR, OBJECT, PER_RANK, REPLICATED, SHARDED, VALUE, classify

MISSING = object()  # a key one side lacks


class ArrayNode:
    __slots__ = ("name", "lib", "dtype", "shape", "sharded", "dtensor")

    def __init__(self, node, path):
        self.name = node[metadata.ARRAY]
        self.lib = node.get("lib")
        self.dtype = node.get("dtype")
        self.shape = node.get("shape")
        self.sharded = bool(node.get("sharded"))
        self.dtensor = node.get("dtensor")  # a DTensor's layout: placements, mesh, chunks [[name, offsets, sizes]]
        if not isinstance(self.name, str) or self.lib not in ("torch", "numpy") or not isinstance(self.dtype, str):
            raise metadata.FormatError(f"'{path_text(path)}': malformed array reference {node!r}")
        if self.dtensor is not None and not _layout_ok(self.dtensor, self.shape):
            raise metadata.FormatError(f"'{path_text(path)}': malformed DTensor layout {self.dtensor!r}")


def _layout_ok(layout, shape):
    def ints(v, n):
        return isinstance(v, list) and len(v) == n and all(type(x) is int and x >= 0 for x in v)

    if not isinstance(layout, dict) or not isinstance(layout.get("chunks"), list) or not isinstance(shape, list):
        return False
    return all(isinstance(c, list) and len(c) == 3 and isinstance(c[0], str) and ints(c[1], len(shape)) and
               ints(c[2], len(shape)) for c in layout["chunks"])


class ObjectNode:
    __slots__ = ("type", "module", "state")

    def __init__(self, node, path, on_tag):
        self.type = node[metadata.OBJECT]
        self.module = bool(node.get("module"))
        if "state" not in node:
            raise metadata.FormatError(f"'{path_text(path)}': object without a state")
        self.state = metadata.decode(node["state"], path, on_tag)


class _SavedStateDict:
    """A state dict saved as a plain dict (dcp.save's form), restoring into the object it came from."""
    __slots__ = ("type", "state")

    def __init__(self, state):
        self.type, self.state = "a state dict", state


class PerRankNode:
    __slots__ = ("key",)

    def __init__(self, node, path):
        self.key = node[metadata.PER_RANK]
        if not isinstance(self.key, str):
            raise metadata.FormatError(f"'{path_text(path)}': malformed per-rank reference {node!r}")


def decode_tree(tree):
    """The checkpoint's tree with its array, object and per-rank nodes as the classes above."""

    def on_tag(tag, node, path):
        if tag == metadata.ARRAY:
            return ArrayNode(node, path)
        if tag == metadata.OBJECT:
            return ObjectNode(node, path, on_tag)
        if tag == metadata.PER_RANK:
            return PerRankNode(node, path)
        if tag == metadata.PICKLE:  # a value DCP pickled (BatonWriter): read as torch.load(weights_only=True) reads
            from baton.dcp.state_tree import decode_pickle
            return decode_pickle(node, path)
        raise metadata.FormatError(f"'{path_text(path)}': unknown tag {tag!r} (baton never loads "
                                   "code or pickles from a checkpoint)")

    return metadata.decode(tree, (), on_tag)


def decode_plain(node, what):
    """A JSON-only value (per-rank entries): any array or object tag is a FormatError."""

    def on_tag(tag, _node, path):
        raise metadata.FormatError(f"{what} '{path_text(path)}': unexpected tag {tag!r}")

    return metadata.decode(node, (), on_tag)


class WholeVersion:
    """A state that takes a version whole (Checkpointer.load): whatever its writer, every key, plain containers
    and whole tensors.

    Restored as one object of the state (its ``state_dict()`` is empty, so
    the version's whole tree goes to ``load_state_dict``, every array
    allocated from the version's metadata), with what only a live leaf can
    otherwise take read whole: a DTensor's boxes into one tensor of its
    global shape, a Sharded's rows of every rank into one array. An object's
    state comes back as its state dict; per-rank entries (RNGState,
    PerRank), which belong to the ranks that saved them, are left out.
    """

    def __init__(self):
        self.state = None

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        self.state = state


class Plan:
    def __init__(self):
        self.targets = {}  # name -> (path, tensor, array or Sharded)
        self.dtensors = {}  # name -> (path, dtensor_chunks.Reads, baton dtype)
        self.errors = []
        self.actions = []  # callables, children first
        self.per_rank = []  # (object, key, path)
        # Whether a target is the program's own memory (a tensor of the state, a DTensor's shard): the read then
        # writes none of it before every rank verified every byte it reads (verify_before_write, a second read).
        # False where every target is a tensor this match allocated (WholeVersion: Checkpointer.load; an
        # object's entries its state dict lacks: baton.lightning's load), which the program gets only after a
        # read that verified: then one read, verifying as it goes, is enough.
        self.writes_live = False


def match(state, local, tree, arrays, strict):
    """The Plan for restoring ``tree`` (decode_tree's) into ``state`` (walked into ``local``).

    ``state``: a dict, or one object whose load_state_dict takes the whole
    tree (as a saved state dict goes into the object restoring it: ``node``).

    ``arrays``: the version's arrays by name ({name: {"dtype", "shape",
    "replicated"}}, from read_metadata), the authority on dtypes and shapes.
    """
    plan = Plan()
    if not isinstance(tree, dict):
        plan.errors.append("the checkpoint's state is not a dict")
        return plan
    _Matcher(plan, local, arrays, strict, whole=isinstance(state, WholeVersion)).node(state, tree, (), create=False,
                                                                                   live=True)
    return plan


class _Matcher:
    """One walk. ``create``: inside the state dict of an object that is not a
    torch module, where what the checkpoint has and the object's state dict
    lacks is created (the object's load_state_dict takes it, as it takes
    torch.load's). ``live``: the program's own containers (the state dict and
    its plain dicts and lists), updated in place; an object's state dict is
    not live (it goes to load_state_dict). ``whole``: the state is a
    WholeVersion, which takes every array whole, an object's state as its
    state dict, and no per-rank entry."""

    def __init__(self, plan, local, arrays, strict, whole=False):
        self.plan = plan
        self.local = local
        self.arrays = arrays
        self.strict = strict
        self.whole = whole

    def error(self, path, text):
        self.plan.errors.append(f"'{path_text(path)}': {text}")

    def node(self, cur, ck, path, create, live):
        """The value that goes at ``path`` after the restore (MISSING: none)."""
        if isinstance(ck, ArrayNode):
            return self.array(cur, ck, path)
        if isinstance(ck, ObjectNode):
            if cur is MISSING and self.whole:  # its state dict, as saved
                return self.node(MISSING, ck.state, path, create=True, live=False)
            if isinstance(cur, dict):  # an object's state saved, a state dict of it restoring (dcp.load's form)
                return self.mapping(cur, ck.state, path, create, live)
            return self.object(cur, ck, path)
        if isinstance(ck, dict) and cur is not MISSING and not isinstance(cur, dict) and classify(cur) == OBJECT:
            # A state dict saved (dcp.save's form: BatonWriter), the object itself restoring.
            return self.object(cur, _SavedStateDict(ck), path)
        if isinstance(ck, PerRankNode):
            if cur is MISSING and self.whole:  # the saving ranks' own, not the version's
                return MISSING
            if cur is MISSING or classify(cur) != PER_RANK:
                return self.conflict(cur, "per-rank state (RNGState, PerRank)", path)
            self.plan.per_rank.append((cur, ck.key, path))
            return cur
        if isinstance(ck, dict):
            return self.mapping(cur, ck, path, create, live)
        if isinstance(ck, (list, tuple)):
            return self.sequence(cur, ck, path, create, live)
        if cur is not MISSING and not _plain(cur):
            return self.conflict(cur, f"the value {ck!r}", path)
        return ck

    def missing(self, ck, path, create):
        """The value for a key the checkpoint has and the state lacks."""
        if create and _needs_live(ck) and not self.whole:
            # A DTensor or a Sharded cannot be made here (its mesh and
            # placements, its rows): strict=False leaves it out, as any key
            # the state lacks (issue 46 item 9: a model with fewer layers
            # through get_state_dict failed where the module as a leaf worked).
            if self.strict:
                self.error(path, "in the checkpoint, not in the state (strict=False ignores it); it holds a DTensor "
                                 "or a Sharded, which baton cannot create (an optimizer's state before its first "
                                 "step: torch.distributed.checkpoint.state_dict.get_state_dict makes it)")
            return MISSING
        if create:
            return self.node(MISSING, ck, path, create=True, live=False)
        if self.strict:
            self.error(path, "in the checkpoint, not in the state (strict=False ignores it)")
        return MISSING

    def conflict(self, cur, what, path):
        held = "nothing" if cur is MISSING else f"a {type(cur).__name__}"
        self.error(path, f"the checkpoint holds {what}, the state {held}")
        return MISSING

    def array(self, cur, ck, path):
        if ck.dtensor is not None or (cur is not MISSING and classify(cur) == DTENSOR):
            return self.dtensor(cur, ck, path)
        saved = self.arrays.get(ck.name)
        if saved is None:
            self.error(path, f"array {ck.name!r} is named in the checkpoint's metadata but not in its arrays")
            return MISSING
        if cur is MISSING:
            if ck.sharded and not self.whole:  # whole: every rank's rows (a replicated registration reads them all)
                self.error(path, "a sharded array the state lacks (baton cannot tell this rank's rows)")
                return MISSING
            one_row = list(saved["shape"]) == [1] and list(ck.shape) == []  # a 0-d tensor DCP's writer stored
            shape = saved["shape"][:-1] if tensors.stored_shape((), ck.dtype) else saved["shape"]  # complex: pairs
            try:
                # Registered whole (every row of the array, this rank's and the others'): the read writes it all.
                new = tensors.allocate(ck.lib, ck.dtype, [] if one_row else shape, path, zeroed=False)
            except (ValueError, ImportError) as e:
                self.error(path, str(e))
                return MISSING
            self.plan.targets[ck.name] = (path, new.reshape(1) if one_row else new)
            return new
        kind = classify(cur)
        if kind not in ARRAY_KINDS:
            return self.conflict(cur, "a tensor", path)
        sharded = kind == SHARDED
        value = cur.tensor if sharded else cur
        item = self.local.by_path.get(path)
        if item is not None:
            baton_dtype = item.baton_dtype
        else:  # a tensor of an object's state dict that load_state_dict gets (not walked as a leaf)
            try:
                tensors.check_keepable(value, path)
                _, _, baton_dtype = tensors.describe(value, path)
            except TypeError as e:
                self.error(path, str(e))
                return MISSING
        if baton_dtype != saved["dtype"]:
            self.error(path, f"dtype {baton_dtype} in the state, {saved['dtype']} in the checkpoint")
        elif not tensors.same_stored_dtype(value, ck.lib, ck.dtype):
            # The same stored bytes under another dtype (complex64 and float32 pairs, a float8 variant and uint8).
            self.error(path, f"dtype {str(value.dtype).replace('torch.', '')} in the state, {ck.dtype} in the "
                             "checkpoint")
        shape = tuple(saved["shape"])
        if sharded:
            if not ck.sharded:
                self.error(path, "a baton.Sharded in the state, a replicated array in the checkpoint")
            if tensors.stored_shape(cur.global_shape, value.dtype) != shape:
                self.error(path, f"global shape {tuple(cur.global_shape)} in the state, {tuple(ck.shape)} in the "
                                 "checkpoint")
        else:
            if ck.sharded:
                self.error(path, "a replicated tensor in the state, a baton.Sharded array in the checkpoint")
            if tuple(value.shape) == () and shape == (1,) and list(ck.shape) == []:
                # A 0-d tensor that DCP's writer stored as one row (its arrays have a dim 0): read through a view.
                self.plan.targets[ck.name] = (path, value.reshape(1))
                self.plan.writes_live = True
                return cur
            if tensors.stored_shape(value.shape, value.dtype) != shape:
                self.error(path, f"shape {tuple(value.shape)} in the state, {tuple(ck.shape)} in the checkpoint")
        self.plan.targets[ck.name] = (path, cur)  # a Sharded stays one: its rows and offset
        self.plan.writes_live = True
        return cur

    def dtensor(self, cur, ck, path):
        """A saved DTensor into the state's DTensor, resharded to its mesh and placements; or the boxes of one
        into a whole tensor, or a tensor saved whole into a DTensor's shard (one box intersection:
        dtensor_chunks.Reads)."""
        live = cur is not MISSING
        if cur is MISSING and self.whole:  # every box into one tensor of the global shape
            try:
                cur = tensors.allocate(ck.lib, ck.dtype, list(ck.shape), path)
            except (ValueError, ImportError) as e:
                self.error(path, str(e))
                return MISSING
        if cur is MISSING:
            self.error(path, "a DTensor the state lacks (baton cannot tell its mesh and placements; "
                             "torch.distributed.checkpoint.state_dict.get_state_dict makes the optimizer's state "
                             "before the first step)")
            return MISSING
        kind = classify(cur)
        if kind not in (DTENSOR, REPLICATED) or (kind == REPLICATED and not tensors.is_tensor(cur)):
            return self.conflict(cur, "a DTensor" if ck.dtensor is not None else "a tensor", path)
        if ck.dtensor is None:
            # A tensor saved whole (or a Sharded's rows: its array is the whole tensor too): one box.
            saved = self.arrays.get(ck.name)
            if saved is None or list(saved["shape"]) != list(tensors.stored_shape(ck.shape, ck.dtype)):
                self.error(path, f"array {ck.name!r} is not the whole tensor of shape {tuple(ck.shape)} in the "
                                 "checkpoint's arrays")
                return MISSING
            ck_chunks = [[ck.name, [0] * len(ck.shape), list(ck.shape)]]
        else:
            ck_chunks = ck.dtensor["chunks"]
        chunks = ck_chunks
        absent = [c[0] for c in chunks if c[0] not in self.arrays]
        if absent:
            self.error(path, f"the DTensor's arrays {absent[:3]} are named in the checkpoint's metadata but not in "
                             "its arrays")
            return MISSING
        item = self.local.by_path.get(path)
        try:
            if item is None:  # in an object's state dict, not walked as a leaf
                value = dtensor_chunks.local_tensor(cur) if kind == DTENSOR else cur
                tensors.check_keepable(value, path)
                _, _, baton_dtype = tensors.describe(value, path)
            else:
                baton_dtype = item.baton_dtype
            saved = {self.arrays[c[0]]["dtype"] for c in chunks}
            if saved and saved != {baton_dtype}:
                self.error(path, f"dtype {baton_dtype} in the state, {', '.join(sorted(saved))} in the checkpoint")
                return MISSING
            value = dtensor_chunks.local_tensor(cur) if kind == DTENSOR else cur
            if not tensors.same_stored_dtype(value, ck.lib, ck.dtype):
                self.error(path, f"dtype {str(value.dtype).replace('torch.', '')} in the state, {ck.dtype} in the "
                                 "checkpoint")
                return MISSING
            if list(cur.shape) != list(ck.shape):
                self.error(path, f"global shape {tuple(cur.shape)} in the state, {tuple(ck.shape)} in the checkpoint")
                return MISSING
            box = item.layout.my_box if item is not None and item.layout is not None else None
            self.plan.dtensors[ck.name] = (path, dtensor_chunks.Reads(path, chunks, cur, box), baton_dtype)
            self.plan.writes_live = self.plan.writes_live or live
        except (TypeError, ValueError) as e:
            self.error(path, str(e).removeprefix(f"baton: cannot keep '{path_text(path)}': "))
            return MISSING
        return cur

    def object(self, cur, ck, path):
        if cur is MISSING or classify(cur) != OBJECT:
            return self.conflict(cur, f"an object ({ck.type}) with state_dict()/load_state_dict()", path)
        sd = self.local.state_dicts[path] if path in self.local.state_dicts else cur.state_dict()
        restored = self.node(sd, ck.state, path, create=not tensors.is_module(cur), live=False)
        if isinstance(ck, _SavedStateDict):
            restored = _optimizer_ids(cur, restored)
        if restored is not MISSING:
            self.plan.actions.append(_LoadStateDict(cur, restored, path))
        return cur

    def mapping(self, cur, ck, path, create, live):
        if cur is MISSING:
            out = type(ck)()
            for k, v in ck.items():
                r = self.node(MISSING, v, path + (k,), create=True, live=False)
                if r is not MISSING:
                    out[k] = r
            return _with_meta(out, ck)
        if not isinstance(cur, dict):
            if _plain(cur) and _plain_ck(ck):
                return ck
            return self.conflict(cur, "a dict", path)
        if self.strict and _other_optimizer(cur, ck, path, self.error):
            return MISSING
        out = type(ck)()
        # DCP's flattening keeps every key as its str ("state.0.exp_avg"): a saved "0" is the live 0.
        as_text = {str(k): k for k in cur if not isinstance(k, str)}
        matched = set()
        for k, v in ck.items():
            if k not in cur and isinstance(k, str) and k in as_text:
                k = as_text[k]
            if k in cur:
                matched.add(k)
                r = self.node(cur[k], v, path + (k,), create=create, live=live)
            else:
                r = self.missing(v, path + (k,), create)
            if r is not MISSING:
                out[k] = r
        for k in cur:
            if k not in matched:
                if self.strict:
                    self.error(path + (k,), "in the state, not in the checkpoint (strict=False keeps it)")
                out[k] = cur[k]
        if live:
            self.plan.actions.append(_UpdateDict(cur, out))
            return cur
        return _with_meta(out, ck)

    def sequence(self, cur, ck, path, create, live):
        if cur is MISSING:
            items = [self.node(MISSING, v, path + (i,), create=True, live=False) for i, v in enumerate(ck)]
            return type(ck)(items)
        if not isinstance(cur, (list, tuple)) or len(cur) != len(ck):
            if _plain(cur) and _plain_ck(ck):
                return ck
            held = f"{len(cur)} items" if isinstance(cur, (list, tuple)) else f"a {type(cur).__name__}"
            self.error(path, f"{len(ck)} items in the checkpoint, {held} in the state")
            return MISSING
        in_place = live and isinstance(cur, list) and isinstance(ck, list)
        items = [self.node(c, v, path + (i,), create=create, live=in_place) for i, (c, v) in enumerate(zip(cur, ck))]
        if any(r is MISSING for r in items):
            return MISSING
        if in_place:
            self.plan.actions.append(_UpdateList(cur, items))
            return cur
        return type(ck)(items)


def _needs_live(node):
    """Whether a checkpoint subtree holds an array that only a live tensor can take (a DTensor, a Sharded)."""
    if isinstance(node, ArrayNode):
        return node.dtensor is not None or node.sharded
    if isinstance(node, (list, tuple)):
        return any(_needs_live(v) for v in node)
    if isinstance(node, dict):
        return any(_needs_live(v) for v in node.values())
    return False


def _optimizer_keys(sd):
    """(per-parameter state keys, param_groups keys) of an optimizer's state dict; None for any other dict."""
    if set(sd) != {"state", "param_groups"} or not isinstance(sd["state"], dict) or \
            not isinstance(sd["param_groups"], (list, tuple)):
        return None
    state = sorted({str(k) for v in sd["state"].values() if isinstance(v, dict) for k in v})
    groups = sorted({str(k) for g in sd["param_groups"] if isinstance(g, dict) for k in g} - {"params"})
    return state, groups


def _other_optimizer(cur, ck, path, error):
    """True (the difference reported) where the checkpoint's optimizer state is another optimizer's.

    Before, AdamW saved and SGD restoring through get_state_dict was blamed
    on a missing get_state_dict (exp_avg, a DTensor, "in the checkpoint, not
    in the state") when the program did use it (issue 46 defect 14). The
    hyperparameter keys of param_groups tell one optimizer from another
    whether or not either holds per-parameter state yet (SGD without
    momentum never does), as the state keys do once both hold some: where
    neither side's keys hold the other's. (One side's keys inside the
    other's, an option a newer torch added or Adam's amsgrad, is left to
    the key-by-key errors.)"""
    saved, live = _optimizer_keys(ck), _optimizer_keys(cur)
    if saved is None or live is None:
        return False
    (saved_state, saved_groups), (live_state, live_groups) = saved, live

    def apart(a, b):  # neither holds the other: a torch release that adds an option to a group is not this
        return not (set(a) <= set(b) or set(b) <= set(a))

    if not apart(saved_groups, live_groups) and not (saved_state and live_state and apart(saved_state, live_state)):
        return False
    error(path, f"the optimizer's state keys differ: the checkpoint's per-parameter state holds {saved_state} and "
                f"its param_groups {saved_groups}, the state's {live_state} and {live_groups} (another optimizer: "
                "restore into the optimizer the checkpoint was saved with)")
    return True


def _optimizer_ids(obj, restored):
    """An optimizer's state dict restoring into the optimizer: optimizer_ids_as_ints."""
    return optimizer_ids_as_ints(restored) if hasattr(obj, "param_groups") else restored


def optimizer_ids_as_ints(restored):
    """An optimizer's state dict as dcp.save flattened it ("state": {"0": ...}) with the parameter ids back as
    ints: its param_groups list them as ints, and load_state_dict would keep a "0" as a parameter of its own
    (the state silently lost). Anything else is returned as it is."""
    if not (isinstance(restored, dict) and isinstance(restored.get("state"), dict)
            and isinstance(restored.get("param_groups"), list)):
        return restored
    ids = {p for g in restored["param_groups"] if isinstance(g, dict) for p in g.get("params", ())}
    state = restored["state"]
    if not all(isinstance(k, str) and k.isdigit() and int(k) in ids for k in state):
        return restored
    out = type(restored)(restored)
    out["state"] = type(state)((int(k), v) for k, v in state.items())
    return out


def _with_meta(out, ck):
    meta = getattr(ck, "_metadata", None)
    if meta is not None:
        out._metadata = meta
    return out


def _plain(value):
    """A live value with no tensor, object or per-rank state inside."""
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_plain(v) for v in value.values())
    return classify(value) == VALUE


def _plain_ck(node):
    if isinstance(node, (list, tuple)):
        return all(_plain_ck(v) for v in node)
    if isinstance(node, dict):
        return all(_plain_ck(v) for v in node.values())
    return not isinstance(node, (ArrayNode, ObjectNode, PerRankNode))


class _LoadStateDict:
    def __init__(self, obj, state, path):
        self.obj, self.state, self.path = obj, state, path

    def __call__(self):
        try:
            self.obj.load_state_dict(self.state)
        except Exception as e:
            raise with_context(e, f"baton: '{path_text(self.path)}': {type(self.obj).__name__}.load_state_dict "
                                  "refused the checkpoint's state") from e


class _UpdateDict:
    def __init__(self, live, out):
        self.live, self.out = live, out

    def __call__(self):
        for k, v in self.out.items():
            if self.live.get(k, MISSING) is not v:
                self.live[k] = v


class _UpdateList:
    def __init__(self, live, items):
        self.live, self.items = live, items

    def __call__(self):
        for i, v in enumerate(self.items):
            if self.live[i] is not v:
                self.live[i] = v
