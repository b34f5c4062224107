"""baton.Checkpointer: checkpoints of state dicts (and of registered arrays)."""

import numpy as np

from baton import _baton, metadata
from baton.metadata import path_text
from baton.names import MARKER
from baton.restore_match import decode_plain, decode_tree, match
from baton.state_walk import Leaf, flatten
from baton.tensors import Binding, identity
from baton.wrappers import Sharded

FORMAT = "baton.state_dict"
RANK_FORMAT = "baton.rank_state"
VERSION = 1  # of the JSON below; the marker array holds it too
_MAX_PASSES = 8  # restore(state): versions tried one after the other when tensors fail to verify


def _is_step(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


class SaveFuture:
    """An asynchronous save in flight (Checkpointer.save_async).

    ``wait(timeout=None)`` completes it: collective, every rank calls it (it
    is Checkpointer.wait). The next save, restore or wait, or close(), completes it too.
    """

    def __init__(self, checkpointer, step):
        self._checkpointer = checkpointer
        self.step = step

    def wait(self, timeout=None):
        """Waits until every rank's write ended and commits the version (collective)."""
        self._checkpointer.wait(timeout)

    def status(self):
        """This rank's write, as this rank knows it: "idle", "writing", "written" or "failed" (local, no MPI)."""
        return self._checkpointer.async_status()

    def __repr__(self):
        return f"baton.SaveFuture(step={self.step})"


class Checkpointer:
    """Atomically committed, verified, resharding checkpoints of a training job.

    Two forms of one class; a Checkpointer serves one of them (the first
    call decides, mixing them is an InvalidArgument):

    **State dicts** (PyTorch programs)::

        rt = baton.Runtime()
        ck = baton.Checkpointer(rt)   # dir: $BATON_CKPT_DIR; level2=True: also $BATON_LOCAL_DIR
        state = {"model": model, "optim": opt, "loader": loader, "rng": baton.RNGState()}
        step = ck.restore(state)      # in place; None on a first run
        for step in range(step or 0, steps):
            train_one_step()
            if (step + 1) % every == 0:
                ck.save(state, step + 1)           # or ck.save_async(state, step + 1)
            if rt.should_stop():
                ck.save(state, step + 1)
                sys.exit(baton.EXIT_REQUEUE)
        ck.wait(); ck.close()         # commits a save_async in flight (close() alone would too)

    ``state`` is a dict. Its leaves: torch tensors (any dtype torch has that
    baton has a type for, bf16 included) and NumPy arrays become baton
    arrays, registered without a copy; objects with ``state_dict()`` and
    ``load_state_dict()`` (modules, optimizers, schedulers, a loader) are
    walked through their state dicts; ``baton.Sharded(t, offset,
    global_shape)`` marks a rank's dim-0 rows; ``baton.RNGState()`` and
    ``baton.PerRank(obj)`` are this rank's own state; everything else
    (numbers, strings, bools, None, bytes, lists, tuples, dicts, NumPy
    scalars) is job-wide metadata kept as JSON, never pickle. A leaf that
    cannot be kept is a TypeError naming its path.

    A tensor that is not a Sharded is replicated: every rank holds the same
    copy (DDP), and a save writes it once in total, its rows spread over the
    ranks (the ranks' copies are compared by hash first: copies that
    differ fail the save, naming the array). Array names are the paths with
    ':' between keys ("model:layer1.weight", "optim:state:0:exp_avg";
    baton.names).

    **Arrays** (NumPy programs, as the C++ API): ``register_replicated``,
    ``register_sharded``, ``save(step)``, ``save_async(step)``,
    ``restore(step=None, arrays=None)``, ``user_blob`` and ``rank_state``
    as bytes.

    Every call that takes a step or restores is collective: all ranks make
    it, in the same order. ``step`` is the number of training steps
    completed. Options (keywords, as baton.ArrayCheckpointer): dir,
    local_dir, group_size, keep, level2, shared_every, local_keep, run_id,
    verify_replicas, peer_timeout (docs/python.md).
    """

    def __init__(self, runtime, dir=None, local_dir=None, **options):
        """Opens the checkpoint directory (collective; takes its writer lock).

        ``runtime``: a baton.Runtime. ``dir``: the shared directory, else
        $BATON_CKPT_DIR; ``local_dir``: the node-local directory (level 2),
        else $BATON_LOCAL_DIR when ``level2=True`` (the job opts in), else none. ``options``: baton.ArrayCheckpointer's.
        """
        self._runtime = runtime
        self._options = dict(options, dir=dir, local_dir=local_dir)
        self._low = _baton.ArrayCheckpointer(runtime, **self._options)
        self._form = None  # "state" or "arrays"
        self._bindings = {}  # array name -> (Binding, registration key)
        self._marker = np.array(VERSION, dtype=np.int64)
        self._rank_state_set = False
        self._earlier_fallbacks = []  # versions skipped by earlier passes of the last restore(state)

    # ----------------------------------------------------------------- forms

    def save(self, state, step=None):
        """Saves ``state`` as version ``step`` and commits it (collective).

        ``save(state, step)``: the state dict; ``save(step)``: the
        registered arrays (array form). Raises baton.Error (a subclass
        naming what failed) when the save failed on any rank; nothing is
        then committed.
        """
        if step is None and _is_step(state):
            self._use("arrays", "save(step)")
            return self._low.save(int(state))
        self._use("state", "save(state, step)")
        self._prepare(state, step)
        self._low.save(int(step))
        return None

    def save_async(self, state, step=None):
        """Saves in the background; returns a SaveFuture once the bytes are staged.

        The version holds the state as it is at this call: the tensors are
        copied into one staging copy before it returns, so the program may
        change them at once. The write goes on in a background thread; the
        next collective call (save, save_async, restore, wait) commits it.
        ``save_async(step)``: the registered arrays (array form).
        """
        if step is None and _is_step(state):
            self._use("arrays", "save_async(step)")
            self._low.save_async(int(state))
            return SaveFuture(self, int(state))
        self._use("state", "save_async(state, step)")
        self._prepare(state, step)
        self._low.save_async(int(step))
        return SaveFuture(self, int(step))

    def restore(self, state=None, step=None, *, strict=True, arrays=None, drop_rank_state_on_resize=False,
                from_level=0):
        """Restores the newest version (or ``step``'s) in place; returns its step, None on a first run.

        ``restore(state)``: into the tensors, objects and dicts of the state
        dict (collective). Tensors are written in place; each object gets
        ``load_state_dict`` with its state as saved (optimizer state the
        object lacks, such as Adam's before its first step, is allocated);
        plain values are put back into the state's dicts and lists;
        RNGState sets this rank's generators. ``strict=True`` refuses,
        naming each path, a tensor whose dtype or shape differs and keys the
        checkpoint lacks or the state lacks, before anything is read;
        ``strict=False`` restores what both have (dtype and shape must still
        match).

        ``restore(step=None, arrays=None)`` (array form): the registered
        arrays, or only those named.

        A version that cannot be read or verified is skipped for the next
        older one (last_restore() says which and why); versions none of
        which can be restored raise baton.NotFound, never a silent first
        run. ``drop_rank_state_on_resize``: at another world size, restore
        without the per-rank state (RNGState and PerRank keep their current
        values) instead of refusing. ``from_level=3``: the shared directory
        only.
        """
        if state is None or _is_step(state):
            if _is_step(state):
                step = int(state)
            self._use("arrays", "restore(step, arrays)")
            return self._low.restore(step=step, arrays=arrays, drop_rank_state_on_resize=drop_rank_state_on_resize,
                                     from_level=from_level)
        self._use("state", "restore(state)")
        if arrays is not None:
            raise self._invalid("restore(state, arrays=...): arrays= is the array form's; to restore part of "
                                "a state, pass that part with strict=False")
        return self._restore_state(state, step, strict,
                                   dict(drop_rank_state_on_resize=drop_rank_state_on_resize, from_level=from_level))

    # ------------------------------------------------------------ array form

    def register_replicated(self, name, array, dtype=None):
        """Registers an array every rank holds the same (array form); keeps a reference, copies nothing."""
        self._use("arrays", "register_replicated")
        self._low.register_replicated(name, array, dtype=dtype)

    def register_sharded(self, name, array, offset, global_shape=None, dtype=None):
        """Registers this rank's rows [offset, offset + len(array)) of dim 0 (array form)."""
        self._use("arrays", "register_sharded")
        self._low.register_sharded(name, array, offset, global_shape=global_shape, dtype=dtype)

    @property
    def user_blob(self):
        """Job-wide bytes saved with the next save (rank 0's kept), given back by restore.

        Settable in the array form; the state-dict form keeps its JSON here.
        """
        return self._low.user_blob

    @user_blob.setter
    def user_blob(self, value):
        self._use("arrays", "user_blob =")
        self._low.user_blob = value

    @property
    def rank_state(self):
        """This rank's own bytes, given back to the same rank at the same world size.

        Settable in the array form; the state-dict form keeps RNGState and
        PerRank here.
        """
        return self._low.rank_state

    @rank_state.setter
    def rank_state(self, value):
        self._use("arrays", "rank_state =")
        self._low.rank_state = value

    # ------------------------------------------------------------ both forms

    def wait(self, timeout=None):
        """Completes the save in flight, if any (collective); baton.TimeoutError past ``timeout`` seconds."""
        return self._low.wait(timeout)

    def wait_or_abandon(self, timeout):
        """For an agreed stop: as wait, but a save not written within ``timeout`` is abandoned (baton.Aborted)."""
        return self._low.wait_or_abandon(timeout)

    def async_status(self):
        """This rank's save in flight: "idle", "writing", "written" or "failed" (local, no MPI)."""
        return self._low.async_status()

    def read_metadata(self, step=None):
        """What the version a restore would try first holds (dict), or None (collective)."""
        return self._low.read_metadata(step)

    def last_restore(self):
        """The last restore's outcome: step, version_path, fallbacks, level, rank_state_dropped (dict)."""
        info = self._low.last_restore()
        if info is not None and self._earlier_fallbacks:
            info = dict(info, fallbacks=self._earlier_fallbacks + list(info.get("fallbacks") or []))
        return info

    def last_stats(self):
        """The last save's or restore's figures: bytes, total_bytes, seconds, phases, level (dict)."""
        return self._low.last_stats()

    @property
    def dir(self):
        """The checkpoint directory (shared, level 3)."""
        return self._low.dir

    @property
    def run_id(self):
        """The directory's run id, the same on every rank."""
        return self._low.run_id

    def close(self):
        """Commits a save_async in flight (as wait(): collective then) and releases the directory."""
        self._low.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        # The extension's __exit__ commits a save in flight, unless an exception unwinds.
        self._low.__exit__(*exc)
        return False

    # --------------------------------------------------------------- inside

    def _use(self, form, call):
        if self._form is None:
            self._form = form
        elif self._form != form:
            forms = {"state": "state-dict form (save(state, step), restore(state))",
                     "arrays": "array form (register_*, save(step), restore(step), user_blob, rank_state)"}
            raise self._invalid(f"{call} belongs to the {forms[form]}, but this Checkpointer serves the "
                                f"{forms[self._form]}: use one Checkpointer per form")

    def _invalid(self, text):
        return _baton.InvalidArgument(f"baton (rank {self._runtime.rank}, {self._runtime.host}): {text}")

    def _prepare(self, state, step):
        if not _is_step(step) or step < 0:
            raise self._invalid(f"save: step must be an int >= 0 (training steps completed), not {step!r}")
        flat = flatten(state)
        stale = set(self._bindings) - set(flat.leaves) - {MARKER}
        if stale:
            self._reopen()
        for leaf in flat.leaves.values():
            self._bind(leaf).before_save()
        self._bind_marker()
        self._low.user_blob = metadata.dumps({"format": FORMAT, "version": VERSION, "tree": flat.tree})
        if flat.per_rank or self._rank_state_set:
            self._low.rank_state = metadata.dumps({"format": RANK_FORMAT, "version": VERSION,
                                                   "entries": flat.per_rank})
            self._rank_state_set = True

    def _reopen(self):
        # The extension has no unregister: an array the state no longer holds
        # would still be saved. A new ArrayCheckpointer on the same directory
        # drops every registration (collective, as save: the states of all
        # ranks have the same keys).
        self._low.wait()
        self._low.close()
        self._low = _baton.ArrayCheckpointer(self._runtime, **self._options)
        self._bindings = {}
        self._rank_state_set = False

    def _bind(self, leaf):
        """The registration of ``leaf``, reused while it is the same tensor with the same memory."""
        key = (identity(leaf.value), leaf.sharded, leaf.offset, leaf.global_shape)
        known = self._bindings.get(leaf.name)
        if known is not None and known[1] == key:
            return known[0]
        binding = Binding(leaf.value, leaf.baton_dtype)
        try:
            if leaf.sharded:
                self._low.register_sharded(leaf.name, binding.buffer, leaf.offset,
                                           global_shape=leaf.global_shape, dtype=binding.dtype)
            else:
                self._low.register_replicated(leaf.name, binding.buffer, dtype=binding.dtype)
        except (ValueError, TypeError, _baton.Error) as e:
            raise type(e)(f"baton: '{path_text(leaf.path)}': {e}") from e
        self._bindings[leaf.name] = (binding, key)
        return binding

    def _bind_marker(self):
        if MARKER not in self._bindings:
            self._low.register_replicated(MARKER, self._marker, dtype="i64")
            self._bindings[MARKER] = (None, None)

    def _restore_state(self, state, step, strict, options):
        # A pass reads the version's JSON (with the marker array only), plans,
        # then reads the tensors. A version whose tensors fail to verify is
        # skipped by the extension for an older one, whose JSON the plan did
        # not see: then the older version is restored whole, in a pass of
        # its own (its step pinned), and last_restore() lists what every
        # pass skipped.
        self._earlier_fallbacks = []
        for _ in range(_MAX_PASSES):
            done, found = self._restore_pass(state, step, strict, options)
            if done:
                return found
            info = self._low.last_restore()
            self._earlier_fallbacks += list(info.get("fallbacks") or [])
            step = info["step"]
        raise _baton.Error(f"baton (rank {self._runtime.rank}, {self._runtime.host}): restore(state): versions "
                           f"kept failing to verify after {_MAX_PASSES} passes (last_restore() lists them)")

    def _restore_pass(self, state, step, strict, options):
        """(True, step restored or None) or (False, None): the tensors came from another version."""
        md = self._low.read_metadata(step)
        self._bind_marker()
        if md is not None and MARKER not in {a["name"] for a in md["arrays"]}:
            names = ", ".join(a["name"] for a in md["arrays"][:8])
            raise self._invalid(f"restore(state): version {md['version_path']} (step {md['step']}) was not saved "
                                f"from a state dict (its arrays: {names}); restore it with the array form "
                                "(restore(step=..., arrays=...)) on a Checkpointer of its own")
        found = self._low.restore(step=step, arrays=[MARKER], **options)
        if found is None:
            return True, None
        if int(self._marker) != VERSION:
            raise self._invalid(f"restore(state): the checkpoint's state-dict format is version "
                                f"{int(self._marker)}; this baton reads version {VERSION} (a newer baton wrote it)")
        version_path = self._low.last_restore()["version_path"]
        if md is None or md["version_path"] != version_path:
            md = self._low.read_metadata(found)
        arrays = {a["name"]: a for a in md["arrays"]}
        plan = self._plan(state, arrays, strict, found, version_path)
        names = list(plan.targets)
        for name in names:
            path, cur = plan.targets[name]
            value = cur.tensor if isinstance(cur, Sharded) else cur
            self._bind(Leaf(name, path, value, cur if isinstance(cur, Sharded) else None))
        if names:
            # The pass's step, not `found`: pinned to found's step, a version
            # that fails to verify could fall back only to an older copy of
            # that same step.
            self._low.restore(step=step, arrays=names, **options)
            if self._low.last_restore()["version_path"] != version_path:
                return False, None
        for name in names:
            self._bindings[name][0].after_restore()
        for action in plan.actions:
            action()
        self._load_per_rank(plan, version_path)
        return True, found

    def _plan(self, state, arrays, strict, found, version_path):
        where = f"step {found}, {version_path}"
        try:
            doc = metadata.loads(self._low.user_blob, f"the user blob of {where}")
            if not isinstance(doc, dict) or doc.get("format") != FORMAT:
                raise metadata.FormatError(f"the user blob of {where} is JSON but not baton's state-dict form")
            if doc.get("version") != VERSION:
                raise metadata.FormatError(f"the state-dict form of {where} is version {doc.get('version')!r}; "
                                           f"this baton reads version {VERSION}")
            tree = decode_tree(doc.get("tree"))
        except metadata.FormatError as e:
            raise self._invalid(f"restore(state): {e}") from None
        plan = match(state, tree, arrays, strict)
        if plan.errors:
            shown = "\n  ".join(plan.errors[:40])
            more = f"\n  ... and {len(plan.errors) - 40} more" if len(plan.errors) > 40 else ""
            raise self._invalid(f"restore(state): the checkpoint ({where}) does not fit the state "
                                f"(nothing was restored):\n  {shown}{more}")
        return plan

    def _load_per_rank(self, plan, version_path):
        if not plan.per_rank:
            return
        raw = self._low.rank_state
        if not raw:
            if self.last_restore().get("rank_state_dropped"):
                return  # restored at another world size with drop_rank_state_on_resize
            raise self._invalid(f"restore(state): {version_path} holds no per-rank state for this rank, "
                                f"but the state has {path_text(plan.per_rank[0][2])}")
        try:
            doc = metadata.loads(raw, f"the per-rank state of {version_path}")
            if not isinstance(doc, dict) or doc.get("format") != RANK_FORMAT or doc.get("version") != VERSION:
                raise metadata.FormatError(f"the per-rank state of {version_path} is not baton's")
            entries = doc.get("entries")
            if not isinstance(entries, dict):
                raise metadata.FormatError(f"the per-rank state of {version_path} has no entries")
            for obj, key, path in plan.per_rank:
                if key not in entries:
                    raise metadata.FormatError(f"the per-rank state of {version_path} lacks '{path_text(path)}'")
                obj.load_state_dict(decode_plain(entries[key], "per-rank state"))
        except metadata.FormatError as e:
            raise self._invalid(f"restore(state): {e}") from None
