"""baton.Checkpointer: checkpoints of state dicts (the registered-array form is baton.ArrayCheckpointer)."""

import sys
import warnings

import numpy as np

from baton import _baton, metadata, storage
from baton.gc_pause import pausing
from baton.errors import ResizeRefused, in_python_words, invalid, with_context
from baton.metadata import path_text
from baton.names import MARKER
from baton.plan_agreement import agree
from baton.restore_match import WholeVersion, decode_plain, decode_tree, match
from baton.state_walk import DTENSOR, REPLICATED, PlanItem, has_state_dict, walk
from baton.tensors import Binding, identity, stored_shape, stored_view, torch_module

FORMAT = "baton.state_dict"
RANK_FORMAT = "baton.rank_state"
VERSION = 1  # of the JSON below; the marker array holds it too
REPLICAS = ("verify", "rank0")


_version_name = storage.version_name


class _Unverified(Exception):
    """A version whose planned tensors could not be read and verified (restore goes to the next older)."""

    def __init__(self, version_path, step, error, record=None):
        super().__init__(version_path)
        self.error = error
        # The extension's own record of the failure (whether it was counted toward quarantine) where it gave one.
        self.record = dict(record) if record else {
            "path": version_path, "step": step, "reason": str(error),
            "code": getattr(error, "code", "Corruption"), "counted": False}


def _saved_as_laid_out(item, reads):
    """Whether ``reads`` reads the very boxes the live DTensor ``item`` is laid out in (names, offsets, sizes:
    the same on every rank), so that its read registers the arrays a save of it registers."""
    if item is None or item.kind != DTENSOR:
        return False
    boxes = [(c.name, tuple(c.offsets), tuple(c.sizes)) for c in item.layout.chunks]
    return boxes == [(c.name, tuple(c.offsets), tuple(c.sizes)) for c in reads.chunks]


def _empty_key(dtype, offset, shape):
    """The key of a registration with no rows (a box another rank owns) of an array of ``shape``."""
    return ("none", dtype, offset, tuple(shape))


def _rows_key(ident, kind, offset, shape):
    """The key of a registration of memory ``ident`` (tensors.identity) as a ``kind`` leaf's rows."""
    return (ident, kind, offset, shape)


def _read_key(reads, idx, view, first, shape):
    """The key Checkpointer._bind gives a save's registration of the same rows, for saved box ``idx`` of
    ``reads`` read into ``view`` from row ``first``: a box read whole into the live shard's own rows (the
    box the save registers from the shard), or none of its rows (a box another rank owns, registered empty);
    None for a buffer of the read's own, which a save does not register.

    A restore at the layout of the last save then registers none of its boxes again (126 DTensors: 252
    registrations), and the save after a restore none of the restore's.
    """
    if first != 0:
        return None
    if tuple(view.shape) == (0,) + shape[1:]:
        return _empty_key(view.dtype, 0, shape)
    if idx in reads.in_place and tuple(view.shape) == shape:
        return _rows_key(identity(view), DTENSOR, 0, shape)
    return None


def _is_step(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


class SaveFuture:
    """An asynchronous save in flight (Checkpointer.save_async).

    ``wait(timeout=None)`` completes it: collective, every rank calls it (it
    is Checkpointer.wait while this save is the one in flight); past
    ``timeout`` it raises baton.TimeoutError and the save stays in flight.
    The next save, restore, wait, read_metadata or close() completes it
    too. Once completed its ``status()`` is "committed" or "failed" and
    ``wait()`` returns at once or raises the failure: each future acts on
    its own step, never on a later save's.
    """

    def __init__(self, checkpointer, step):
        self._checkpointer = checkpointer
        self.step = step
        self._outcome = None  # "committed" or "failed", once completed
        self._error = None

    def _settle(self, error):
        self._outcome, self._error = ("committed", None) if error is None else ("failed", error)

    def wait(self, timeout=None):
        """Waits until every rank's write ended and commits the version (collective while in flight).

        Raises the save's failure (on every rank, as the commit did) when it failed.
        """
        if self._outcome is None and self._checkpointer._future is self:
            self._checkpointer.wait(timeout)
        if self._outcome == "failed":
            raise self._error

    def status(self):
        """This save as this rank knows it: "writing", "written" (waits for its commit) or "failed" while in flight,
        then "committed" or "failed" (local, no MPI)."""
        if self._outcome is not None:
            return self._outcome
        return self._checkpointer.async_status()

    def __repr__(self):
        return f"baton.SaveFuture(step={self.step}, {self.status()})"


class Checkpointer:
    """Atomically committed, verified, resharding checkpoints of a training job's state dict.

    ::

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
    ranks. ``replicas="verify"`` (the default) compares the ranks' copies
    by hash first: copies that differ fail the save, naming the array.
    ``replicas="rank0"``: rank 0's copy is the one saved, as DDP's
    broadcast of buffers at the next forward would make it everybody's
    (BatchNorm's running statistics between a step and the next forward);
    it costs one broadcast of the replicated bytes per save. A saved array
    is never stitched from several ranks' copies. Array names are the paths
    with ':' between keys ("model:layer1.weight", "optim:state:0:exp_avg";
    baton.names).

    Every call that saves, restores or waits is collective: all ranks make
    it, in the same order, with states of the same keys, kinds, dtypes and
    shapes. The ranks agree on that first (baton.plan_agreement): a
    difference is the same baton.InvalidArgument on every rank, naming the
    paths and the ranks; a rank that does not come within the runtime's
    collective_timeout makes the others exit 75. ``step`` is the number of
    training steps completed. Options (keywords, as baton.ArrayCheckpointer
    except replicas): dir, local_dir, group_size, keep, level2,
    shared_every, local_keep, run_id, peer_timeout, replicas
    (docs/python.md). NumPy programs that register arrays themselves use
    baton.ArrayCheckpointer.
    """

    def __init__(self, runtime, dir=None, local_dir=None, *, replicas="verify", **options):
        """Opens the checkpoint directory (collective; takes its writer lock).

        ``runtime``: a baton.Runtime. ``dir``: the shared directory, else
        $BATON_CKPT_DIR; ``local_dir``: the node-local directory (level 2),
        else $BATON_LOCAL_DIR when ``level2=True`` (the job opts in), else
        none. ``replicas``: "verify" or "rank0" (above). ``options``:
        baton.ArrayCheckpointer's.
        """
        if _is_step(runtime) or not isinstance(runtime, _baton.Runtime):
            raise TypeError(f"baton.Checkpointer(runtime, ...): runtime must be a baton.Runtime, not "
                            f"{type(runtime).__name__}")
        if replicas not in REPLICAS:
            raise invalid(runtime, f"Checkpointer(replicas={replicas!r}): replicas is 'verify' (refuse copies "
                                   "that differ) or 'rank0' (save rank 0's copy)")
        if "verify_replicas" in options:
            raise invalid(runtime, "Checkpointer(verify_replicas=...): the state-dict form takes replicas='verify' "
                                   "or replicas='rank0' (never a copy stitched from several ranks)")
        self._runtime = runtime
        self._replicas = replicas
        self._options = dict(options, dir=dir, local_dir=local_dir, verify_replicas=replicas == "verify")
        try:
            self._low = storage.open_for_writing(runtime, **self._options)
        except _baton.Error as e:
            raise in_python_words(e) from None
        self._bindings = {}  # array name -> (Binding, registration key)
        self._marker = np.array(VERSION, dtype=np.int64)
        self._rank_state_set = False
        self._must_reopen = False  # a save failed: its registrations may differ between the ranks
        self._earlier_fallbacks = []  # versions skipped by earlier passes of the last restore(state)
        self._refuse_resize = False  # the last restore(state)'s drop_rank_state_on_resize=False
        self._future = None  # the SaveFuture of the save_async in flight, if any
        self._closed = False  # close() was called
        self._last_walk = None  # the LocalPlan of the last walk (_walk), whose unchanged items the next reuses

    # ------------------------------------------------------------- the calls

    @pausing  # the cyclic collector (gc_pause.py)
    def save(self, state, step=None):
        """Saves ``state`` as version ``step`` and commits it (collective).

        Raises baton.Error (a subclass naming what failed) when the save
        failed on any rank; nothing is then committed.
        """
        self._save(state, step, "save")

    @pausing  # the cyclic collector (gc_pause.py)
    def save_async(self, state, step=None):
        """Saves in the background; returns a SaveFuture once the bytes are staged.

        The version holds the state as it is at this call: the tensors are
        copied into one staging copy before it returns, so the program may
        change them at once. The write goes on in a background thread; the
        next collective call (save, save_async, restore, wait) commits it.
        """
        self._save(state, step, "save_async")
        self._future = SaveFuture(self, int(step))
        return self._future

    @pausing  # the cyclic collector (gc_pause.py)
    def restore(self, state=None, step=None, *, strict=True, drop_rank_state_on_resize=True, from_level=0):
        """Restores the newest version (or ``step``'s) in place; returns its step, None on a first run.

        The newest version is the last one committed, which is the highest
        step unless the program saved a lower step after a higher one (as
        after going back to an earlier version): pass ``step`` to choose.
        Tensors are written in place (their autograd version counters
        move, as copy_ moves them); each object gets ``load_state_dict``
        with its state as saved (optimizer state the object lacks, such as
        Adam's before its first step, is allocated); plain values are put
        back into the state's dicts and lists; RNGState sets this rank's
        generators. ``strict=True`` refuses, naming each path, a tensor
        whose dtype or shape differs and keys the checkpoint lacks or the
        state lacks, before anything is read; ``strict=False`` restores
        what both have (dtype and shape must still match).

        Every rank reads and verifies every byte it restores before any
        tensor of the state is written (then reads it again, verified, into
        the state's own tensors; where every tensor the version fills is one
        the restore makes, as an object's entries its state dict lacks, one
        read verifies as it goes): a version that cannot be read or verified
        is skipped for the next older one, planned anew from
        its own JSON (last_restore() says which were skipped and why), and
        the state keeps nothing of it. Versions none of which can be
        restored raise baton.NotFound, never a silent first run; nor is a
        directory with no version but files baton did not write (a
        torch.save file): baton.InvalidArgument names them.
        At another world size than the version's, the per-rank state
        (RNGState, PerRank) cannot go back to its ranks: by default
        (``drop_rank_state_on_resize=True``) the restore goes on without it,
        those objects keep their current values, and rank 0 warns
        (RuntimeWarning) naming their paths; ``False`` refuses before
        anything is restored: every rank records the refusal in the event
        log and raises baton.ResizeRefused, a SystemExit with
        EXIT_REQUEUE (75), so that an uncaught refusal ends the job to be
        requeued onto as many ranks as saved it (`baton run` ends the job so,
        naming it, never as a bug). ``from_level=3``: the shared directory
        only.

        ``state`` may also be one object with ``state_dict()`` and
        ``load_state_dict()`` (not a dict): the version's whole tree, whatever
        its keys, goes to its ``load_state_dict``, as a state dict saved
        under a key goes into the object restoring under that key: what its
        ``state_dict()`` returns is matched (in place, by the rules above),
        what it lacks is allocated from the version's metadata (unless the
        object is a torch module). So a version can be read without knowing
        its keys (baton.lightning's CheckpointIO reads any writer's so).
        """
        def check():
            if step is not None and (not _is_step(step) or step < 0):
                raise invalid(self._runtime, f"restore(state, step={step!r}): step is an int >= 0 or None")

        local = self._agreed_plan("restore", state, [repr(step), bool(strict), bool(drop_rank_state_on_resize),
                                                     repr(from_level)], check)
        self._commit_in_flight()
        if self._reopen_failed():  # on every rank (the extension agrees on opening): tried again
            self._reopen()
        try:
            # The extension always restores without the per-rank state at
            # another world size: whether that is refused is decided here,
            # on the plan, where the paths it concerns are known.
            self._refuse_resize = not drop_rank_state_on_resize
            return self._restore_state(state, local, step, strict,
                                       dict(drop_rank_state_on_resize=True, from_level=from_level))
        except _baton.Error as e:
            raise in_python_words(e) from None

    @pausing  # the cyclic collector (gc_pause.py)
    def load(self, step=None, *, from_level=0):
        """The newest version (or ``step``'s) as a new state dict, None where the directory holds none (collective).

        What ``torch.load`` gives of a ``torch.save`` file: the version's own
        structure, whoever wrote it (this class, ``dcp.save`` with a
        BatonWriter, ``baton ckpt import``, baton.lightning), its tensors
        new, whole and on the CPU: a DTensor's boxes make one tensor of its
        global shape, a ``Sharded``'s rows of every rank one array; an
        object (a module, an optimizer) comes back as its state dict, with
        its int keys and OrderedDicts; per-rank entries (RNGState, PerRank)
        are left out. Every rank reads every byte, verified, as restore
        does (a version that fails to verify is passed over for the next
        older one), so each rank needs the memory of the whole state; once,
        not twice as into a state's own tensors: the tensors are new, and the
        program gets them only after the read verified.
        ``baton ckpt export --format torch`` writes what this returns.
        """
        whole = WholeVersion()
        found = self.restore(whole, step, strict=False, from_level=from_level)
        return None if found is None else whole.state

    def wait(self, timeout=None):
        """Completes the save in flight, if any (collective); baton.TimeoutError past ``timeout`` seconds."""
        agree(self._runtime, {"call": ["wait"]}, "wait")
        if self._future is not None:
            return self._commit_in_flight(timeout)
        if self._reopen_failed():
            return None  # nothing can be in flight
        return self._low.wait(timeout)

    def wait_or_abandon(self, timeout):
        """For an agreed stop: as wait, but a save not written within ``timeout`` is abandoned (baton.Aborted)."""
        agree(self._runtime, {"call": ["wait_or_abandon"]}, "wait_or_abandon")
        if self._future is not None:
            return self._commit_in_flight(timeout, abandon=True)
        return self._low.wait_or_abandon(timeout)

    def async_status(self):
        """This rank's save in flight: "idle", "writing", "written" or "failed" (local, no MPI)."""
        return self._low.async_status()

    def read_metadata(self, step=None):
        """What the version a restore would try first holds (dict), or None (collective)."""
        agree(self._runtime, {"call": ["read_metadata", step]}, "read_metadata")
        self._commit_in_flight()
        if self._reopen_failed():
            self._reopen()
        return self._low.read_metadata(step)

    def last_restore(self):
        """The last restore's outcome: step, version_path, fallbacks, level, rank_state_dropped (dict)."""
        info = self._low.last_restore()
        if info is not None and self._earlier_fallbacks:
            # The last extension call's own fallbacks may repeat the last pass's failure (a restore that raised
            # keeps its record): each version once, in the order skipped.
            seen, fallbacks = set(), []
            for f in self._earlier_fallbacks + list(info.get("fallbacks") or []):
                if f["path"] not in seen:
                    seen.add(f["path"])
                    fallbacks.append(f)
            info = dict(info, fallbacks=fallbacks)
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
        self._close_low(None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        # The extension's __exit__ commits a save in flight, unless an exception unwinds.
        self._close_low(exc)
        return False

    # ------------------------------------------------------- the save in flight

    def _commit_in_flight(self, timeout=None, abandon=False):
        """Commits the save_async in flight, if any, and settles its future (collective while one is in flight:
        every rank has the same one). Its failure is raised here, as the call that completes it raises it; past
        ``timeout`` (baton.TimeoutError) it stays in flight and its future says "writing" or "written".
        """
        if self._future is None:
            return
        try:
            if abandon:
                self._low.wait_or_abandon(timeout)
            else:
                self._low.wait(timeout)
        except _baton.TimeoutError:
            if abandon:  # wait_or_abandon: abandoned
                self._settle_in_flight(sys.exc_info()[1])
            raise
        except KeyboardInterrupt:
            self._settle_in_flight(None)  # held until the commit ended, which succeeded (the message says so)
            raise
        except BaseException as e:
            self._settle_in_flight(e)
            raise
        self._settle_in_flight(None)

    def _settle_in_flight(self, error):
        future, self._future = self._future, None
        if future is not None:
            future._settle(error)

    def _close_low(self, exc):
        """Closes the extension's checkpointer: it commits the save in flight unless an exception unwinds."""
        self._closed = True
        self._last_walk = None  # the state's tensors are not held past close()
        unwinding = exc is not None and exc[0] is not None
        try:
            if exc is None:
                self._low.close()
            else:
                self._low.__exit__(*exc)
        except BaseException as e:
            self._settle_in_flight(e)
            raise
        if unwinding and self._future is not None:
            self._settle_in_flight(_baton.Aborted(
                f"baton (rank {self._runtime.rank}): save_async({self._future.step}) was abandoned, not committed: "
                f"an exception ({exc[0].__name__}) left the Checkpointer's with block"))
        self._settle_in_flight(None)

    # --------------------------------------------------------------- inside

    def _agreed_plan(self, call, state, args, check=None):
        """The rank's LocalPlan of ``state``, once every rank's plan agrees (collective, first of each call).

        A rank whose walk fails agrees on its error instead: then every rank
        raises (that rank its own error), and none waits for the others.
        """
        local, error = None, None
        try:
            if not isinstance(state, dict) and not (call == "restore" and has_state_dict(state)):
                one = " or, to restore, one object with state_dict()/load_state_dict()" if call == "restore" else ""
                raise TypeError(f"baton: {call}(state, ...): the state must be a dict of names to modules, "
                                f"optimizers, tensors and values{one}, not a {type(state).__name__} (registered "
                                "arrays and a step alone are baton.ArrayCheckpointer's)")
            if check is not None:
                check()
            local = self._walk(state)
        except (TypeError, ValueError) as e:
            error = e
        if error is not None:
            doc = {"call": [call] + args, "error": f"{type(error).__name__}: {getattr(error, 'message', error)}"}
        else:
            doc = local.agreed_json([call] + args, reopen=self._needs_reopen(local) if call != "restore" else False)
        try:
            agree(self._runtime, doc, call)
        except _baton.InvalidArgument as e:
            if error is not None:
                raise error from e  # this rank's own error; the others name it
            raise
        if error is not None:
            raise error
        return local

    def _walk(self, state):
        """The rank's LocalPlan of ``state`` (state_walk.walk; `baton ckpt import`'s writer keeps values JSON
        cannot hold as torch.load read them: baton.dcp.convert)."""
        # The last walk's items are taken again for the leaves that did not change (state_walk.walk): it
        # holds the state's tensors, as the registrations do, until the next walk or close().
        local = walk(state, previous=self._last_walk)
        self._last_walk = local
        return local

    def _agree_local_step(self, call, step, error):
        """Agrees on the outcome of a rank-local step (``error``, or None) before the next collective (collective).

        Every rank raises when one failed: that rank its own error, the
        others the agreement's baton.InvalidArgument naming the rank and its
        error; none goes on alone into a collective its peers never reach
        (issue 46 item 5).
        """
        text = None if error is None else f"{type(error).__name__}: {getattr(error, 'message', error)}"
        try:
            agree(self._runtime, {"call": [call, step], "error": text}, f"{call} ({step})")
        except _baton.InvalidArgument as e:
            if error is not None:
                raise error from e
            raise
        if error is not None:
            raise error

    def _reopen_failed(self):
        """Whether the last reopen failed (the extension's checkpointer closed by it, not by close())."""
        return self._must_reopen and self._low.closed and not self._closed

    def _needs_reopen(self, local):
        stale = set(self._bindings) - local.array_names() - {MARKER}
        return bool(stale) or self._must_reopen

    def _save(self, state, step, call):
        def check():
            if not _is_step(step) or step < 0:
                raise invalid(self._runtime, f"{call}(state, step): step must be an int >= 0 (training steps "
                                             f"completed), not {step!r}")

        local = self._agreed_plan(call, state, [int(step) if _is_step(step) else repr(step)], check)
        self._commit_in_flight()
        if self._needs_reopen(local):
            self._reopen()
        error = None
        try:
            for item in local.items.values():
                for binding in self._bind(item):
                    binding.before_save()
            self._bind_marker()
            self._low.user_blob = metadata.dumps({"format": FORMAT, "version": VERSION, "tree": local.tree})
            if local.per_rank or self._rank_state_set:
                # Over 64 MiB (or not JSON) on one rank: refused here, before the agreement (issue 46 item 5).
                raw = metadata.dumps({"format": RANK_FORMAT, "version": VERSION, "entries": local.per_rank})
                try:
                    self._low.rank_state = raw
                except _baton.Error as e:
                    raise with_context(e, f"baton: {call}: this rank's per-rank state ("
                                          f"{', '.join(repr(k) for k in local.per_rank)}) is {len(raw)} bytes of "
                                          "JSON; a version keeps at most 64 MiB per rank") from e
                self._rank_state_set = True
        except (TypeError, ValueError, _baton.Error) as e:
            error = e
            self._must_reopen = True  # some arrays of this state may be registered, others not
        # Registering and the blobs are this rank's own work; their failure is
        # agreed on too, so that no rank goes into the write while another raised.
        try:
            self._agree_local_step(call, "registered", error)
        except _baton.InvalidArgument:
            self._must_reopen = True  # on every rank: the next call drops the registrations everywhere
            raise
        if self._replicas == "rank0":
            self._broadcast_replicas(local, call)
        try:
            if call == "save":
                self._low.save(int(step))
            else:
                self._low.save_async(int(step))
        except _baton.Error as e:
            # Every rank got the failure (the extension agrees on it); the
            # next call drops the registrations, which may differ now.
            self._must_reopen = True
            if "differs between ranks" in str(e) and "replicated" in str(e):
                raise with_context(e, f"baton: {call}: replicas='verify' refuses copies that differ (BatchNorm's "
                                      "running statistics under DDP before the next forward?); "
                                      "Checkpointer(replicas='rank0') saves rank 0's copy, as DDP's broadcast "
                                      "would") from e
            raise

    def _broadcast_replicas(self, local, call):
        for item in local.items.values():
            if item.kind == REPLICATED:  # a DTensor's Replicate() boxes are written by their owner only
                binding = self._bindings[item.name][0]
                _baton._broadcast(self._runtime, binding.bytes_view(), 0,
                                  f"{call}: rank 0's copy of '{path_text(item.path)}' (replicas='rank0')")

    def _reopen(self):
        # Dropping every registration at once: an array the state no longer
        # holds would still be saved, and unregistering each (the extension's
        # unregister) would need the old plan's names on every rank. A new
        # ArrayCheckpointer on the same directory drops them all (collective:
        # the ranks agreed to, in their plans' "reopen"). A reopen that fails (the storage away for a
        # moment) leaves the old one closed and _must_reopen set: the next
        # call agrees on reopening again (issue 46 item 7), instead of
        # every later call meeting a closed checkpointer.
        self._must_reopen = True
        self._bindings = {}
        self._rank_state_set = False
        if not self._low.closed:
            self._low.wait()
            self._low.close()
        try:
            self._low = storage.open_for_writing(self._runtime, **self._options)
        except _baton.Error as e:
            raise with_context(in_python_words(e), "baton: reopening the checkpoint directory (the next save "
                                                   "or restore tries again)") from None
        self._must_reopen = False

    def _bind(self, item):
        """The registrations of ``item`` (a list: a DTensor is one array per box), each reused while it is
        the same tensor with the same memory."""
        out = []
        for name, value, offset, global_shape in item.registrations():
            if value is None:  # a box another rank owns: registered with no rows
                value = torch_module().empty((0,) + tuple(global_shape[1:]), dtype=item.value.dtype, device="cpu")
                key = _empty_key(value.dtype, offset, global_shape)
            else:
                # A plain tensor's identity was taken by this call's walk already (PlanItem.identity).
                known_id = item.identity if value is item.value else None
                key = _rows_key(known_id or identity(value), item.kind, offset, global_shape)
            known = self._bindings.get(name)
            if known is not None and key is not None and known[1] == key:
                out.append(known[0])
                continue
            binding = Binding(value, item.baton_dtype,
                              receive=self._replicas == "rank0" and item.kind == REPLICATED and self._runtime.rank != 0)
            self._register(name, binding, offset, global_shape, item.path)
            self._bindings[name] = (binding, key)
            out.append(binding)
        return out

    def _register(self, name, binding, offset, global_shape, path):
        try:
            if offset is not None:
                self._low.register_sharded(name, binding.buffer, offset, global_shape=global_shape,
                                           dtype=binding.dtype)
            else:
                self._low.register_replicated(name, binding.buffer, dtype=binding.dtype)
        except (ValueError, TypeError, _baton.Error) as e:
            raise with_context(e, f"baton: '{path_text(path)}'") from e

    def _bind_reads(self, reads, baton_dtype):
        """Registers the rows a restore reads of each saved box of a DTensor (dtensor_chunks.Reads).

        Boxes that are whole rows of the live shard are read into it (the restore verifies every rank's
        bytes before it writes any: verify_before_write), the others into buffers that copy() then reads.
        """
        reads.into_local()
        for idx, (chunk, buf, first) in enumerate(reads.buffers):
            # In the stored form (complex as float pairs: a view of buf, which reads.copy() then reads).
            view = stored_view(buf)
            shape = tuple(stored_shape(chunk.array_shape, buf.dtype))
            key = _read_key(reads, idx, view, first, shape)
            known = self._bindings.get(chunk.name)
            if key is not None and known is not None and known[1] == key:
                continue  # the save's registration of the same rows (a restore at the layout it saved)
            binding = Binding(view, baton_dtype)
            self._register(chunk.name, binding, first, list(shape), reads.path)
            self._bindings[chunk.name] = (binding, key)  # key None: the next save registers the state's own

    def _bind_marker(self):
        if MARKER not in self._bindings:
            self._low.register_replicated(MARKER, self._marker, dtype="i64")
            self._bindings[MARKER] = (None, None)

    def _restore_state(self, state, local, step, strict, options):
        # A pass reads a version's JSON (with the marker array only), plans
        # against it, then reads the planned tensors (verified first), pinned to
        # that version (the extension's restore(version=...)): it never
        # switches to a version the plan did not see. A version whose
        # tensors fail to verify is left (the state untouched) for the next older one, which the extension's own
        # listing names (restore(older_than=...): the one place that orders
        # versions, through its file layer); it is planned anew from its own
        # JSON (it may hold other arrays). Each pass goes to an older
        # version, so the passes end; last_restore() lists what every pass
        # skipped.
        self._earlier_fallbacks = []
        older_than, failed = "", None
        while True:
            try:
                found = self._restore_pass(state, local, step, strict, options, older_than)
            except _Unverified as e:
                self._earlier_fallbacks.append(e.record)
                older_than, failed = _version_name(e.record["path"]), e
                continue
            except _baton.NotFound as e:
                if failed is None:
                    raise
                raise self._none_older(step, failed, e) from failed.error
            if found is None and failed is not None:
                raise self._none_older(step, failed, None) from failed.error
            if found is None:
                self._refuse_foreign_files(step)
            return found

    def _refuse_foreign_files(self, step):
        """No version at all: a first run, unless the directory holds files baton did not write (collective).

        Rank 0 looks (one listing of the shared directory, so the ranks
        cannot see two different ones) and the ranks agree on its answer:
        a program pointed at a directory of torch.save files or another
        tool's output would otherwise start from scratch without a word.
        """
        error = None
        if self._runtime.rank == 0:
            found = storage.foreign_entries(self.dir)
            if found:
                shown = ", ".join(repr(n) for n in found[:8]) + (f" and {len(found) - 8} more" if len(found) > 8
                                                                 else "")
                which = "restore(state)" if step is None else f"restore(state, step={step})"
                error = invalid(self._runtime, f"{which}: {self.dir} holds no baton version but {len(found)} "
                                               f"entr{'y' if len(found) == 1 else 'ies'} baton did not write "
                                               f"({shown}): not taken for a first run; give the Checkpointer a "
                                               "directory of its own (a new or empty one starts from scratch), "
                                               "and to resume from a torch.save file or a DCP checkpoint, "
                                               "convert it first: `baton ckpt import SOURCE NEWDIR`")
        self._agree_local_step("restore", "first run", error)

    def _none_older(self, step, failed, why):
        """baton.NotFound after ``failed`` (the last _Unverified): no older version restores (``why``: the extension's word)."""
        which = "restore(state)" if step is None else f"restore(state, step={step})"
        reasons = "; ".join(f"{r['path']}: {r['reason']}" for r in self._earlier_fallbacks)
        older = f"none older could be restored ({why})" if why is not None else "none is older"
        return _baton.NotFound(f"baton (rank {self._runtime.rank}, {self._runtime.host}): {which}: no version can be "
                               f"restored: {len(self._earlier_fallbacks)} failed to verify ({reasons}), {older}")

    def _restore_pass(self, state, local, step, strict, options, older_than):
        """The step restored (None on a first run); _Unverified when the version's tensors fail to verify.

        ``older_than``: a version's name; only versions committed before it
        (the extension's restore(older_than=...)), "" for any.

        One read of the version's manifest plans the pass (read_metadata
        as_restore: the version restore() would take, its arrays and the
        state-dict tree in its user blob, damaged manifests passed over and
        counted as restore() counts them), and one restore pinned to that
        version reads the planned tensors and the format marker: the
        manifest is read twice and parsed once on each rank (the
        extension keeps its last parse), where a restore of the marker
        alone before the plan cost a third read and a shard open per pass
        (0.10 s of a 0.93 s FSDP2 restore of 2,040 boxes).
        """
        md = self._low.read_metadata(step, older_than=older_than, as_restore=True,
                                     from_level=options.get("from_level", 0))
        if md is None:
            return None
        self._earlier_fallbacks += list(md.get("skipped") or [])
        if MARKER not in {a["name"] for a in md["arrays"]}:
            names = ", ".join(a["name"] for a in md["arrays"][:8])
            if "dcp-metadata" in {a["name"] for a in md["arrays"]}:  # reader.py's _LEGACY_METADATA (no torch here)
                raise invalid(self._runtime, f"restore(state): version {md['version_path']} (step {md['step']}) "
                                             "was written by a BatonWriter of before the one format (2026-12-06: "
                                             "DCP's pickled Metadata, which only BatonReader reads): load it with "
                                             "dcp.load(state_dict, storage_reader=baton.dcp.BatonReader(dir)), or "
                                             "convert it once into today's form, which every reader reads: "
                                             "`baton ckpt export DIR OUT --step N && baton ckpt import OUT NEWDIR "
                                             "--step N`")
            raise invalid(self._runtime, f"restore(state): version {md['version_path']} (step {md['step']}) was "
                                         f"not saved from a state dict (its arrays: {names}); restore it with "
                                         "baton.ArrayCheckpointer (restore(step=..., arrays=...))")
        found, version_path = md["step"], md["version_path"]
        pinned = _version_name(version_path)
        arrays = {a["name"]: a for a in md["arrays"]}
        # Matching the state (its plain keys too, which the agreed plan does
        # not hold) and registering its tensors are this rank's own work:
        # their outcome is agreed on before the collective read. The state's
        # own tensors are registered (the save's registrations, reused): the
        # restore verifies every rank's rows before it writes any
        # (verify_before_write), so a version that fails leaves them as they
        # are, without a whole-size scratch copy of the state.
        plan, names, bindings, error = None, [], [], None
        try:
            plan = self._match(state, local, arrays, strict, found, version_path, md["user_blob"])
            names = list(plan.targets)
            for name in names:
                path, cur = plan.targets[name]
                item = local.by_path.get(path)
                if item is None or item.leaf is not cur or item.name != name:  # not a leaf the walk found as it is
                    item = PlanItem(path, cur)
                    item.name = name
                bindings += self._bind(item)
            for _, reads, baton_dtype in plan.dtensors.values():
                self._bind_reads(reads, baton_dtype)
                names += [chunk.name for chunk, _, _ in reads.buffers]
        except (TypeError, ValueError, _baton.Error) as e:
            error = e
        self._agree_local_step("restore", "matched", error)
        saved_at = md.get("world_size")
        # Decided on the version and the agreed options alone, the same on every rank
        # (before the read: a refusal restores nothing).
        if md.get("has_rank_state") and saved_at != self._runtime.size:
            self._resize(plan, found, saved_at)
        self._bind_marker()
        try:
            # Pinned: the version planned on, or nothing (no fallback inside: the next pass plans the next).
            # The marker is read with the planned tensors (verified as they are); its value was checked in the
            # plan already (the tree's format version), so it is a check of the bytes, not a second plan.
            # Into the state's own tensors: every rank verifies all it reads before any is written (a second
            # read); into tensors this pass allocated (load(), baton.lightning's load), which the program gets
            # only once the read verified, one read that verifies each chunk before it is used.
            self._low.restore(step=found, arrays=[MARKER] + names, version=pinned,
                              verify_before_write=plan.writes_live, **options)
        except (_baton.CorruptCheckpointError, _baton.NotFound) as e:
            failed = (self._low.last_restore() or {}).get("fallbacks") or []
            mine = [f for f in failed if _version_name(f["path"]) == pinned]
            raise _Unverified(version_path, found, e, mine[-1] if mine else None) from e
        if int(self._marker) != VERSION:
            raise invalid(self._runtime, f"restore(state): {version_path} holds state-dict format version "
                                         f"{int(self._marker)} beside a tree of version {VERSION}: not baton's "
                                         "writing (an edited checkpoint)")
        for binding in bindings:
            binding.after_restore()
        for _, reads, _ in plan.dtensors.values():
            reads.copy()
        # The plain targets were registered as the state's own: nothing to give back. A DTensor read box by box
        # as it was saved (the same boxes: the same arrays as the save registers, on every rank) into its live
        # rows or into nothing holds no memory of its own either, and the next save's walk registers the state
        # anew (those bindings have no key): only the other leaves are rebound now (0.025 s of a 0.7 s restore
        # of an FSDP2 state of 510 DTensors, cProfile, 2026-12-06). Which leaves may differ between ranks (a
        # rank's scratch); the registered names, dtypes and shapes, which the next call agrees on, do not.
        self._rebind_leaves(local, [name for name, (_, reads, _) in plan.dtensors.items()
                                    if reads.holds_scratch() or not _saved_as_laid_out(local.items.get(name), reads)])
        for action in plan.actions:
            action()
        self._load_per_rank(plan, version_path)
        return found

    def _rebind_leaves(self, local, names):
        """The state's own tensors registered again in place of a DTensor's read buffers, which are then freed.

        Only the walk's leaves (the program's tensors, which the next save
        registers anyway); a registration that fails here leaves the buffers
        registered until the next save replaces it (that save's walk sees
        another memory): nothing collective depends on it.
        """
        for name in names:
            item = local.items.get(name)
            if item is not None:
                try:
                    self._bind(item)
                except (TypeError, ValueError, _baton.Error):
                    pass

    def _match(self, state, local, arrays, strict, found, version_path, blob):
        where = f"step {found}, {version_path}"
        try:
            doc = metadata.loads(blob, f"the user blob of {where}")
            if not isinstance(doc, dict) or doc.get("format") != FORMAT:
                raise metadata.FormatError(f"the user blob of {where} is JSON but not baton's state-dict form")
            if doc.get("version") != VERSION:
                raise metadata.FormatError(f"the state-dict form of {where} is version {doc.get('version')!r}; "
                                           f"this baton reads version {VERSION}")
            tree = decode_tree(doc.get("tree"))
        except metadata.FormatError as e:
            raise invalid(self._runtime, f"restore(state): {e}") from None
        plan = match(state, local, tree, arrays, strict)
        if plan.errors:
            shown = "\n  ".join(plan.errors[:40])
            more = f"\n  ... and {len(plan.errors) - 40} more" if len(plan.errors) > 40 else ""
            raise invalid(self._runtime, f"restore(state): the checkpoint ({where}) does not fit the state "
                                         f"(nothing was restored):\n  {shown}{more}")
        return plan

    def _resize(self, plan, step, saved_at):
        """At another world size: refuses (ResizeRefused) when asked to, else warns on rank 0 that the per-rank state stays."""
        paths = ", ".join(f"'{path_text(path)}'" for _, _, path in plan.per_rank)
        size = self._runtime.size
        if self._refuse_resize:
            which = f"the state's per-rank state ({paths})" if paths else "its per-rank state"
            text = (f"refused to go on at {size} ranks: step {step} was saved by {saved_at} ranks and "
                    f"{which} goes back only to the same ranks; restore(state, "
                    f"drop_rank_state_on_resize=True) goes on without it")
            _baton.Runtime.record_failure(text, kind="refused")  # `baton run` reads it: a refusal, not a bug
            if self._runtime.rank == 0:
                sys.stderr.write(f"baton rank 0 on {self._runtime.host}: {text} (baton.ResizeRefused: exit "
                                 f"{_baton.EXIT_REQUEUE} unless caught, to be requeued onto {saved_at} ranks)\n")
                sys.stderr.flush()
            raise ResizeRefused(text)
        if paths and self._runtime.rank == 0:
            warnings.warn(f"baton: step {step} was saved by {saved_at} ranks and restores at {size}: the per-rank "
                          f"state ({paths}) is not restored and keeps this run's values on every rank "
                          f"(restore(state, drop_rank_state_on_resize=False) refuses instead)", RuntimeWarning,
                          stacklevel=5)  # the program's restore(state) call

    def _load_per_rank(self, plan, version_path):
        if not plan.per_rank:
            return
        raw = self._low.rank_state
        if not raw:
            if self.last_restore().get("rank_state_dropped"):
                return  # restored at another world size without it (_resize warned)
            raise invalid(self._runtime, f"restore(state): {version_path} holds no per-rank state for this rank, "
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
            raise invalid(self._runtime, f"restore(state): {e}") from None
