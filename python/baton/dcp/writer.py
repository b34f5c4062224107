"""BatonWriter: torch.distributed.checkpoint saves into baton's format.

    dcp.save(state_dict, storage_writer=baton.dcp.BatonWriter("/shared/ckpt"))

DCP plans (which rank writes which chunk, replicated entries once) and
baton writes: every tensor WriteItem of the agreed plan becomes one baton
array, named by the rule baton.Checkpointer names the same leaf by,
registered on the rank that owns it with its data and on every other rank
with no rows, so one collective baton Save writes each rank's own chunks
into the HDF5 shard files (an xxh3 per chunk). The version is described as
a Checkpointer's is (baton.dcp.state_tree: the state-dict tree, its values
as JSON, in the version's user blob), so every reader reads it:
dcp.load with BatonReader, Checkpointer.restore, the Lightning
CheckpointIO, `baton ckpt export`. It is committed by renaming its manifest;
retention (keep), level 2 (level2/local_dir) and every other
baton.ArrayCheckpointer option apply as they do there.

The checkpointer stays open across saves (baton.dcp.open_checkpointers:
one per directory per process, opened on the program's thread); under
dcp.async_save, DCP's background thread calls MPI only through it, on its
own communicators.
"""
import dataclasses
import inspect
import io
import sys
import threading

import numpy as np
import torch
from torch.distributed.checkpoint.planner import WriteItemType
from torch.distributed.checkpoint.staging import AsyncStager
from torch.distributed.checkpoint.storage import StorageWriter, WriteResult
from torch.futures import Future

from baton import _baton, metadata
from baton.checkpointer import FORMAT, VERSION
from baton.gc_pause import paused, pausing
from baton.dcp import open_checkpointers, state_tree, stored_form, runtime as runtimes
from baton.names import MARKER

_NOT_LOOKED_UP = object()


@dataclasses.dataclass(frozen=True)
class _Shared:
    """What every rank's plan carries (storage_data): every tensor chunk of the version, named."""
    chunks: list


def _chunks_of(plans):
    """Every rank's tensor WriteItems as state_tree.Chunk (named); its bytes entries are gathered in write_data."""
    chunks, seen = [], {}
    for rank, plan in enumerate(plans):
        mappings = plan.planner_data
        for item in plan.items:
            fqn = item.index.fqn
            path = state_tree.path_of(fqn, mappings)
            if item.type == WriteItemType.BYTE_IO:
                continue
            td = item.tensor_data
            c = state_tree.Chunk(fqn, path, td.chunk.offsets, td.chunk.sizes, td.size, td.properties.dtype,
                                 item.type == WriteItemType.SHARD)
            if c.name in seen:
                raise _baton.InvalidArgument(
                    "BatonWriter: ranks %d and %d both write %r (array %s): DCP's plan must write each chunk once"
                    % (seen[c.name], rank, fqn, c.name))
            seen[c.name] = rank
            chunks.append(c)
    return chunks


class BatonWriter(StorageWriter, AsyncStager):
    """A torch.distributed.checkpoint StorageWriter that writes baton versions.

    BatonWriter(path=None, *, step=None, runtime=None, keep=3, level2=False,
                local_dir=None, cache_staged_state_dict=True, **options)

    path: the baton checkpoint directory (None: $BATON_CKPT_DIR); dcp.save's
      checkpoint_id, when given, replaces it (dcp.async_save's must name the
      same directory: the checkpointer is opened before DCP hands it over).
    step: the version's step (training steps completed); None: one more
      than the newest version's (0 in an empty directory).
    runtime: a baton.Runtime over the same processes as torch.distributed
      (None: one per process, made on first use).
    keep, level2, local_dir and the other options: baton.ArrayCheckpointer's.
    cache_staged_state_dict: under dcp.async_save, keep the CPU copy of the
      state stage() makes for the process's next async save, which copies
      into it where a tensor keeps its shape and dtype (DCP's stagers take
      the same option, False by default there): a training loop's staging
      memory is allocated and faulted in once. The memory: one copy of the
      rank's tensors per process, until close(). False: new memory at every
      save, freed when the save ends (staging.py).

    The directory's checkpointer stays open across saves, for every
    BatonWriter of this process on it (the directory's writer lock held).
    close() (or a with block) closes it, after the save in flight; so do
    another opener of the directory in this process (a BatonReader, a
    baton.Checkpointer, an ArrayCheckpointer: it gets the directory), the
    Runtime's close and the interpreter's exit. The next save opens it again.

    Works with dcp.save and dcp.async_save. Under async_save the writer is
    also DCP's stager: stage(), on the calling thread, opens the checkpointer
    there and copies the state to CPU memory (later changes never reach the
    version; each tensor copied once, where DCP's stager copies a DTensor
    twice); DCP's background thread then plans, writes and commits,
    its MPI calls on the checkpointer's own communicators only, never on
    the Runtime's world where the program's collectives run. A second save
    on a directory while one is in flight (a dcp.async_save, or a dcp.save,
    by this or another BatonWriter) waits, at its call, until the first has
    ended: every rank waits for its own first save, which ends on every
    rank alike, so all ranks go on together. Refusing instead would need
    the ranks to agree whether their first save had ended (rank 0's may
    have while rank 1's has not) and would refuse on some ranks only; before,
    the two saves' collectives met in another order on each rank and failed
    as "the ranks registered different arrays" or "rows overlap" (issue 46
    item 14). async_checkpointer_type=PROCESS is refused at the call:
    dcp.async_save raises baton.InvalidArgument naming THREAD on every rank,
    before anything is staged or written, and the writer and the directory
    serve the next save (its process would be no MPI rank).
    After a save, `last_step` is the step written.
    """

    # stage() copies before it returns; DCP's call of synchronize_staging after it submitted the save (on
    # the calling thread, before dcp.async_save returns) tells the save in flight that it will run
    # (InFlight.handed): one whose async_save raised before that is never waited for.
    _synchronize_after_execute = True

    def __init__(self, path=None, *, step=None, runtime=None, keep=3, level2=False, local_dir=None,
                 cache_staged_state_dict=True, **options):
        super().__init__()
        self.path = path
        self.step = step
        self.last_step = None
        self._runtime = runtime
        self._cache_staged = bool(cache_staged_state_dict)
        self._options = dict(options, keep=keep, level2=level2, local_dir=local_dir)
        self._lock = threading.Lock()
        self._staged = None  # the InFlight of an async save staged here and not yet begun on DCP's thread
        self._local = threading.local()  # the save on this thread: its checkpoint_id, Entry and InFlight

    # --- DCP's stager (dcp.async_save, on the calling thread) ---------------------------------------------
    @pausing  # the cyclic collector, as the Checkpointer's calls (baton/gc_pause.py)
    def stage(self, state_dict):
        """Opens the directory's checkpointer on this (the program's) thread, after the save in flight on it
        ended, and returns a copy of `state_dict` in CPU memory for DCP's background thread to save (the
        process's kept staging buffers where no save reads them any more: staging.py)."""
        if _async_save_asked_for_a_process():
            # Before anything is opened or copied: the writer and the directory stay as they were.
            raise self._process_refused()
        entry = self._open_here("dcp.async_save")
        in_flight = open_checkpointers.InFlight(entry, self.step)
        # Into the process's kept staging buffers once the save that read them is done (else new memory).
        staged = open_checkpointers.staging().stage(state_dict, in_flight, keep=self._cache_staged)
        entry.in_flight = in_flight
        self._local.staging = in_flight
        with self._lock:
            self._staged = in_flight
        return staged

    def synchronize_staging(self):
        # stage() copied before it returned: nothing to wait for. DCP calls this once its executor holds
        # the save (dcp.async_save, on the calling thread): that save will run.
        in_flight, self._local.staging = getattr(self._local, "staging", None), None
        if in_flight is not None:
            in_flight.handed()

    # --- DCP's protocol ---------------------------------------------------------------------------------
    def reset(self, checkpoint_id=None):
        self._local.checkpoint_id = checkpoint_id
        staged = self._staged
        if checkpoint_id is not None and (staged is None or staged.staged_by is threading.current_thread()):
            self.path = checkpoint_id
        self._begun_here()

    def set_up_storage_writer(self, is_coordinator, *args, **kwargs):
        # The first call of DCP's save on every rank, before its first collective.
        self.is_coordinator = is_coordinator
        checkpoint_id, self._local.checkpoint_id = getattr(self._local, "checkpoint_id", None), None
        with self._lock:
            staged = self._staged
            if staged is not None and staged.staged_by is not threading.current_thread():
                self._staged = None  # DCP's background thread, beginning the save stage() staged
            else:
                staged = None
        if staged is not None:
            staged.begin()
            self._local.entry, self._local.in_flight = staged.entry, staged
            if checkpoint_id is not None and open_checkpointers.directory_key(checkpoint_id) != staged.entry.key:
                raise _baton.InvalidArgument(
                    "BatonWriter: dcp.async_save(checkpoint_id=%r) names another directory than the writer's %s: "
                    "the checkpointer is opened in stage(), on the calling thread, before DCP hands checkpoint_id "
                    "to its background thread; give the directory to BatonWriter(path)"
                    % (checkpoint_id, staged.entry.key))
            return
        self._local.entry, self._local.in_flight = self._open_here("dcp.save"), None

    def prepare_local_plan(self, plan):
        return plan

    def prepare_global_plan(self, plans):
        # Every rank registers every array of the version (its own with data,
        # the others with no rows): each plan carries the whole list, named
        # and placed in the tree here once (the coordinator's plan is every
        # rank's: DCP scatters it).
        chunks = _chunks_of(plans)
        return [dataclasses.replace(p, storage_data=_Shared(chunks)) for p in plans]

    def write_data(self, plan, planner):
        shared = plan.storage_data
        if not isinstance(shared, _Shared):
            # DefaultSavePlanner(enable_plan_caching=True) hands a cached plan
            # that never went through this writer's prepare_global_plan.
            raise _baton.InvalidArgument(
                "BatonWriter: the plan carries no array list (storage_data %r): it did not come through "
                "BatonWriter.prepare_global_plan; a planner that caches plans across saves "
                "(enable_plan_caching=True) is not supported" % (type(shared).__name__,))
        entry = getattr(self._local, "entry", None)
        if entry is None:
            raise _baton.InvalidArgument("BatonWriter: write_data without set_up_storage_writer on this thread (%s): "
                                         "DCP's save calls it first" % threading.current_thread().name)
        self._local.entry = self._local.in_flight = None
        with entry.lock:
            if not entry.open():
                raise _baton.InvalidArgument(
                    "BatonWriter: the checkpointer of %s was closed while this save was in flight (the Runtime's "
                    "close? BatonWriter.close() waits for the save): nothing was written" % entry.key)
            results = self._save(entry, plan, planner, shared)
        future = Future()
        future.set_result(results)
        return future

    def close(self):
        """Closes the directory's checkpointer (shared by this process's BatonWriters on it), after the save in
        flight on it ended, and frees the process's staged copy kept for the next async save; the next save
        opens it again. On the program's thread; closing twice is harmless."""
        try:
            path = self.path
            open_checkpointers.release(path, "BatonWriter(%r).close()" % (path,), drop_staging=True)
        finally:
            with self._lock:
                self._staged = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def finish(self, metadata, results):
        pass  # the version was committed by write_data's save, its tree with it

    def storage_meta(self):
        self._begun_here()  # DCP's first call on its thread when no checkpoint_id was given (reset is not called)
        return None

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return False  # never picked by DCP on its own: a baton directory is chosen by passing a BatonWriter

    def __reduce__(self):
        # The backstop of stage()'s refusal, where DCP did not call stage()
        # (an async_stager= of the program's) or where stage() could not see
        # the checkpointer type: dcp.async_save(async_checkpointer_type=PROCESS)
        # sends the writer to a spawned process of its own; there baton cannot
        # start MPI (it is no rank of the job), and the ranks then waited 60 s
        # in MPI_Finalize and left with 75, a requeue of a program that had
        # finished (issue 46 item 10). Refused when DCP sends it, on every
        # rank alike: the save's future raises this, nothing is written.
        # The save stage() staged never begins: no later save waits for it.
        with self._lock:
            staged, self._staged = self._staged, None
        if staged is not None and staged.entry.in_flight is staged:
            staged.entry.in_flight = None
        raise self._process_refused()

    def _process_refused(self):
        return _baton.InvalidArgument(
            "BatonWriter(%r): dcp.async_save(..., async_checkpointer_type=AsyncCheckpointerType.PROCESS) is not "
            "supported: the writer would run in a process outside the MPI job, where baton cannot reach the other "
            "ranks; use AsyncCheckpointerType.THREAD (the default), whose background thread writes and commits "
            "the version (nothing was written)" % (self.path,))

    # --- helpers ----------------------------------------------------------------------------------------
    def _begun_here(self):
        """On DCP's thread, its first call of the writer in a save stage() staged (reset with a checkpoint_id,
        else storage_meta, both before DCP's planner runs): the save has begun there, and has ended when that
        thread has, even if DCP fails before set_up_storage_writer and never calls the writer again."""
        staged = self._staged
        if staged is not None and staged.staged_by is not threading.current_thread():
            staged.begin()

    def _open_here(self, call):
        """The directory's open checkpointer, for a save whose MPI calls this thread makes (or hands on)."""
        rt = runtimes.resolve(self._runtime)
        runtimes.check_world(rt, "BatonWriter")
        return open_checkpointers.open_for_save(self.path, rt, self._options,
                                                "BatonWriter: %s into %r" % (call, self.path))

    def _save(self, entry, plan, planner, shared):
        """Registers this save's arrays on the open checkpointer, saves them (collective, on its own
        communicators) and drops the registrations again: the next save registers its own, and no
        staged copy stays referenced between saves."""
        ck = entry.ck
        names_of = {(c.fqn, c.offsets): c for c in shared.chunks}
        mine, my_values = {}, []
        for item in plan.items:
            if item.type == WriteItemType.BYTE_IO:
                my_values.append(self._value_node(item, planner, plan.planner_data))
            else:
                mine[names_of[(item.index.fqn, tuple(int(o) for o in item.tensor_data.chunk.offsets))].name] = item
        # The values (JSON, or DCP's pickle where JSON cannot hold one) are known to their owner only: one
        # all-gather gives every rank the whole tree, as every rank's Checkpointer has it. On the
        # checkpointer's own communicator: this may be DCP's background thread.
        got = ck.allgather_bytes(metadata.dumps(my_values), "BatonWriter: the state's non-tensor values")
        values = {}
        for r, raw in enumerate(got):
            for path, node in metadata.loads(raw, "rank %d's values" % r):
                values[tuple(path)] = node
        blob = metadata.dumps({"format": FORMAT, "version": VERSION, "tree": state_tree.tree_of_plan(shared.chunks,
                                                                                                      values)})
        results = []
        held = []  # the registered buffers stay alive until the save returns
        try:
            # The collector paused while the chunks are registered (a few objects each), not for the write:
            # under dcp.async_save this is DCP's thread, and the program goes on meanwhile.
            with paused():
                for c in shared.chunks:
                    shape = c.sizes or (1,)
                    item = mine.get(c.name)
                    data = torch.empty((0,) + shape[1:], dtype=c.dtype, device="cpu")
                    if item is not None:
                        data = self._tensor_of(planner.resolve_data(item), c, shape)
                    # Every dtype DCP saves (complex, float8 variants): stored_form.
                    held.append(stored_form.register(ck, c.name, data, 0, stored_form.stored_shape(shape, c.dtype)))
                    if item is not None:
                        results.append(WriteResult(index=item.index, size_in_bytes=data.nbytes, storage_data=c.name))
            marker = np.array(VERSION, dtype=np.int64)
            ck.register_replicated(MARKER, marker, dtype="i64")
            ck.user_blob = blob
            for item in plan.items:
                if item.type == WriteItemType.BYTE_IO:
                    results.append(WriteResult(index=item.index, size_in_bytes=0, storage_data=None))
            step, known = self.step, entry.newest_step
            if step is None:
                if known is None:
                    newest = ck.read_metadata()
                    known = -1 if newest is None else newest["step"]
                step = known + 1
            entry.newest_step = None
            ck.save(step)
            # The newest step while this process holds the directory's lock: no other writer can commit one.
            entry.newest_step = step if self.step is None or (known is not None and step > known) else None
            self.last_step = step
        finally:
            for name in ck.registered:
                ck.unregister(name)
        return results

    @staticmethod
    def _value_node(item, planner, mappings):
        """[path, node] of one bytes entry this rank owns: the object as JSON where it can be, else DCP's pickle."""
        fqn = item.index.fqn
        path = state_tree.path_of(fqn, mappings)
        lookup = getattr(planner, "lookup_object", None)
        obj = lookup(item.index) if callable(lookup) else _NOT_LOOKED_UP
        if obj is _NOT_LOOKED_UP or isinstance(obj, io.BytesIO):
            node = metadata.pickled_node(planner.resolve_data(item).getbuffer())
        else:
            node = state_tree.encode_value(path, obj, lambda: planner.resolve_data(item).getbuffer())
        return [list(path), node]

    @staticmethod
    def _tensor_of(value, c, shape):
        if not isinstance(value, torch.Tensor):
            raise _baton.InvalidArgument("BatonWriter: %r resolved to %s, not a tensor" % (c.fqn, type(value)))
        t = value.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        return t.contiguous().reshape(shape)


def _async_save_asked_for_a_process():
    """Whether the dcp.async_save that called stage() was given async_checkpointer_type=PROCESS.

    Stack inspection, confined here because DCP tells its stager nothing of
    the executor: stage(state_dict) is the writer's only call on the calling
    thread before async_save hands the writer to the executor, and the type
    is async_save's own argument (torch 2.15, state_dict_saver.async_save:
    stage first, then _ProcessBasedAsyncCheckpointExecutor pickles the writer
    on a thread of its own, where a refusal reaches only the future). The
    frame is found by async_save's code object, not its name; where there is
    none (stage() called by other code, a torch without the argument) the
    answer is False and __reduce__ remains the refusal.
    """
    try:
        from torch.distributed.checkpoint import state_dict_saver
        code = inspect.unwrap(state_dict_saver.async_save).__code__
        process = state_dict_saver.AsyncCheckpointerType.PROCESS
    except (ImportError, AttributeError):
        return False
    frame = sys._getframe(1)
    try:
        while frame is not None:
            if frame.f_code is code:
                return frame.f_locals.get("async_checkpointer_type") == process
            frame = frame.f_back
        return False
    finally:
        del frame
