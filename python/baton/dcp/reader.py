"""BatonReader: torch.distributed.checkpoint loads from baton's format.

    dcp.load(state_dict, storage_reader=baton.dcp.BatonReader("/shared/ckpt"))

read_metadata restores the version's stored DCP Metadata (baton's restore:
the newest version every rank can read and verify); read_data registers,
per rank, only the rows of the chunks its ReadItems need, and registers
DCP's targets themselves (planner.resolve_tensor) wherever a target is
whole contiguous rows of the stored chunk (baton.dcp.read_targets; the rest
goes through scratch memory, copied in afterwards). It restores them in one
collective baton Restore pinned to the version read_metadata planned on,
with verify_before_write: every rank reads and verifies every chunk it will
read (whole HDF5 chunks, each by its xxh3), the ranks agree, and only then
is each chunk read again, verified again and written: no byte that failed
verification reaches a target, and a load that fails leaves the program's
tensors as they were. Nothing pickled in a checkpoint runs code: the
Metadata and the bytes entries are read by baton.dcp.safe_unpickle (what
torch.load(weights_only=True) allows), or the load is refused naming the
entry.
A version whose chunks fail verification is skipped for the next older
one, as baton.Checkpointer.restore does; the plan made from the newer
version's Metadata is used for the older one only when both Metadata are
the same (the same state at the same world size), and the older one is
then read pinned the same way; else the load fails naming both versions,
the targets untouched.
"""
import io
from collections import defaultdict

import numpy as np
import torch
from torch.distributed.checkpoint.metadata import TensorStorageMetadata
from torch.distributed.checkpoint.planner import LoadItemType
from torch.distributed.checkpoint.storage import StorageReader
from torch.futures import Future

from baton import _baton, metadata, storage, tensors
from baton.checkpointer import FORMAT, VERSION
from baton.gc_pause import pausing
from baton.names import MARKER
from baton.restore_match import decode_tree
from baton.dcp import read_targets, safe_unpickle, state_tree
from baton.dcp import stored_form, runtime as runtimes

# The array of a version BatonWriter wrote before the one format (2026-12-06): DCP's Metadata, pickled (read by safe_unpickle only).
_LEGACY_METADATA = "dcp-metadata"


class BatonReader(StorageReader):
    """A torch.distributed.checkpoint StorageReader of baton versions.

    BatonReader(path=None, *, step=None, runtime=None, from_level=0, **options)

    path: the baton checkpoint directory (None: $BATON_CKPT_DIR); dcp.load's
      checkpoint_id, when given, replaces it.
    step: that step's newest version; None: the newest version.
    runtime: a baton.Runtime over the same processes as torch.distributed.
    from_level and the other options: baton.ArrayCheckpointer's restore and
      constructor options (level2/local_dir to read node-local copies).

    After a load, `last_restore` is baton's account of it (step,
    version_path, fallbacks, level), `bytes_read` what this rank read
    (whole chunks, each verified; each chunk twice, its verification and
    its read into the targets: verify_before_write), `scratch_bytes` the
    scratch memory the load made for pieces that could not be read into
    their targets (0 when every target took its rows itself:
    baton.dcp.read_targets) and `metadata_bytes` the size of the stored DCP
    Metadata, which every rank reads in full at each load.
    """

    def __init__(self, path=None, *, step=None, runtime=None, from_level=0, **options):
        super().__init__()
        self.path = path
        self.step = step
        self.from_level = from_level
        self.last_restore = None
        self.bytes_read = None
        self.scratch_bytes = None
        self.metadata_bytes = None
        self._runtime = runtime
        self._options = options
        self._metadata = None
        self._planned = None  # what the plan was made on: the version's tree (user blob), or its pickled Metadata
        self._values = None   # the tree's values by fqn (DCP's bytes entries)
        self._form = None     # "tree", or "dcp" (a version BatonWriter wrote before the one format (2026-12-06))
        self._version_meta = None  # read_metadata's account of the version planned on (its arrays), for read_data
        # The checkpointer read_metadata opened, kept for read_data: one open per load (an open is
        # collective: the directory checked on rank 0, communicators duplicated). read_data closes it;
        # a load that stops in between (DCP's planning failed) leaves it to the next reset or load.
        self._ck = None

    # --- DCP's protocol ---------------------------------------------------------------------------------
    def reset(self, checkpoint_id=None):
        if checkpoint_id is not None:
            self.path = checkpoint_id
        self._close()
        self._metadata = self._planned = self._values = self._form = self._version_meta = None

    def _close(self):
        ck, self._ck = self._ck, None
        if ck is not None:
            ck.close()

    def _open(self):
        rt = runtimes.resolve(self._runtime)
        runtimes.check_world(rt, "BatonReader")
        # A reader creates nothing and writes nothing where it reads (storage.read_only_options).
        return storage.open_read_only(rt, dir=self.path, **self._options)

    @pausing  # the cyclic collector, as the Checkpointer's calls (baton/gc_pause.py)
    def read_metadata(self):  # no **kwargs: DCP would retry with rank= for rank-local metadata baton has not
        self._close()
        ck = self._open()
        try:
            # Found as a restore finds it (as_restore: versions with damaged manifests passed over and named);
            # it carries the tree (the user blob) that the load is planned on.
            meta = self._version(ck)
            self._version_meta = meta
            if MARKER in {a["name"] for a in meta["arrays"]}:
                blob = self._read_tree(ck, meta)
            else:
                blob = self._read_legacy(ck, meta)
        except BaseException:
            ck.close()
            raise
        self._ck = ck
        self._planned = blob
        self.metadata_bytes = len(blob)
        return self._metadata

    def _read_tree(self, ck, meta):
        """The version's state-dict tree (every writer's form) as DCP Metadata (state_tree.dcp_view).

        From the manifest read_metadata read (its user blob, verified with
        it): no shard is opened to plan; the format marker is read, verified,
        with the planned arrays (read_data).
        """
        blob = meta["user_blob"]
        where = meta["version_path"]
        self.last_restore = {"step": meta["step"], "version_path": where,
                             "fallbacks": list(meta.get("skipped") or [])}
        try:
            doc = metadata.loads(blob, "the user blob of %s" % where)
            if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
                raise metadata.FormatError("its user blob is not baton's state-dict form")
            view = state_tree.dcp_view(decode_tree(doc.get("tree")), {a["name"]: a for a in meta["arrays"]})
        except metadata.FormatError as e:
            raise _baton.CorruptCheckpointError("BatonReader: %s: %s" % (where, e)) from None
        self._metadata, self._values, self._form = view.metadata, view.values, "tree"
        return blob

    def _read_legacy(self, ck, meta):
        """The DCP Metadata pickled in a version BatonWriter wrote before the one format (2026-12-06) (its dcp-metadata array)."""
        blob = np.zeros({a["name"]: a["shape"] for a in meta["arrays"]}[_LEGACY_METADATA][0], np.uint8)
        ck.register_sharded(_LEGACY_METADATA, blob, offset=0, global_shape=[blob.size])
        ck.restore(step=self.step, arrays=[_LEGACY_METADATA], from_level=self.from_level)
        self.last_restore = ck.last_restore()
        raw = blob.tobytes()
        # Read without running code: whoever can write the directory wrote this pickle (baton.dcp.safe_unpickle).
        self._metadata = safe_unpickle.metadata(raw, "%s: the %r array of %s" % (
            self.path, _LEGACY_METADATA, self.last_restore and self.last_restore["version_path"]))
        self._values, self._form = None, "dcp"
        return raw

    def set_up_storage_reader(self, metadata, is_coordinator, *args, **kwargs):
        self._metadata = metadata

    def prepare_local_plan(self, plan):
        return plan

    def prepare_global_plan(self, plans):
        return plans

    @pausing  # the cyclic collector, as the Checkpointer's calls (baton/gc_pause.py)
    def read_data(self, plan, planner):
        if self._planned is None:
            raise _baton.InvalidArgument("BatonReader: read_data before read_metadata (dcp.load calls both, in order)")
        md = self._metadata
        chunk_sizes = {}
        for fqn, entry in md.state_dict_metadata.items():
            if isinstance(entry, TensorStorageMetadata):
                for c in entry.chunks:
                    chunk_sizes[(fqn, tuple(c.offsets))] = (tuple(c.sizes), entry.properties.dtype)
        # Per array: the ReadItems of this rank that read it.
        wanted = defaultdict(list)
        for item in plan.items:
            if self._form == "tree" and item.type == LoadItemType.BYTE_IO:
                continue  # a value of the tree: no array (below)
            wanted[md.storage_data[item.storage_index]].append(item)
        ck, self._ck = self._ck, None
        if ck is None or ck.closed:
            ck = self._open()
        try:
            # The version the plan was made on, and only it: a fallback is decided below, before a byte moves.
            pinned = storage.version_name(self.last_restore["version_path"])
            arrays, baton_dtypes = self._arrays(ck, pinned, self._version_meta)
            # DCP's targets themselves where they can take the rows, scratch where not (read_targets): a
            # version of before the one format with bytes entries is read into scratch, as those are
            # unpickled after the read and may refuse the load.
            reads, error = None, None
            try:
                reads = read_targets.plan(wanted, arrays, chunk_sizes, planner, self.path,
                                          allow_direct=self._form == "tree" or
                                          not any(i.type == LoadItemType.BYTE_IO for i in plan.items))
            except Exception as e:  # a planner's own resolve_tensor may raise anything
                error = e
            _agree(ck, error)
            self.scratch_bytes = reads.scratch_bytes
            # The restore is collective and the ranks must register the same
            # arrays: every array of the version, with the rows this rank
            # needs (none for most), and what the plan was made on (the marker
            # and the user blob; before the one format, the pickled Metadata),
            # to check that an older version the load falls back to holds it.
            marker = np.zeros((), np.int64)
            if self._form == "tree":
                ck.register_replicated(MARKER, marker, dtype="i64")
                legacy = None
            else:
                legacy = torch.empty(arrays[_LEGACY_METADATA][0], dtype=torch.uint8, device="cpu")
                reads.registered[_LEGACY_METADATA] = (legacy, 0)
            for name, (shape, dtype) in arrays.items():
                if name == MARKER and self._form == "tree":
                    continue
                buf, first = (reads.registered.get(name) or
                              (torch.empty((0,) + shape[1:], dtype=dtype, device="cpu"), 0))
                if shape == ():
                    # A 0-d tensor a Checkpointer saved replicated (no dim 0 to take rows of): every rank
                    # reads its one element.
                    buf = buf.reshape(()) if buf.numel() == 1 else torch.empty((), dtype=dtype, device="cpu")
                    ck.register_replicated(name, buf.view(torch.uint8) if buf.dtype.itemsize == 1 and
                                           buf.dtype != torch.uint8 and buf.dtype != torch.int8 else buf,
                                           dtype=baton_dtypes[name])
                    continue
                stored_form.register(ck, name, buf, first, shape)
            restored = self._restore_verified(ck, pinned, legacy)
            self.bytes_read = ck.last_stats().get("bytes_read")
            if self._form == "tree" and int(marker) != VERSION:  # the tree's own version was checked in the plan
                raise _baton.CorruptCheckpointError(
                    "BatonReader: %s holds state-dict format version %d beside a tree of version %d: not "
                    "baton's writing (an edited checkpoint)" % (restored["version_path"], int(marker), VERSION))
        finally:
            ck.close()
        self.last_restore = restored
        # Every byte verified and in place; what can still refuse comes before the scratch pieces are
        # copied in: the bytes entries (DCP's planners torch.load them with weights_only=False, so they
        # get only what weights_only=True read, saved again: baton.dcp.safe_unpickle).
        byte_values = {}
        for name, items in reads.byte_items.items():
            buf, _ = reads.registered[name]
            for item in items:
                byte_values[id(item)] = safe_unpickle.resaved(  # a version of before the one format (2026-12-06)
                    buf.numpy().tobytes(), "%s: the bytes entry %r (array %r of %s)"
                    % (self.path, item.dest_index.fqn, name, restored["version_path"]))
        if self._form == "tree":
            for item in plan.items:
                if item.type == LoadItemType.BYTE_IO:
                    byte_values[id(item)] = _saved(self._values[item.storage_index.fqn])
        for item in plan.items:
            if item.type == LoadItemType.BYTE_IO:
                planner.load_bytes(item, byte_values[id(item)])
        reads.copy_in(planner)
        future = Future()
        future.set_result(None)
        return future

    def _restore_verified(self, ck, pinned, legacy):
        """Restores the registered arrays from version ``pinned``, every byte verified on every rank before any
        is written (verify_before_write); its last_restore, with every version skipped on the way.

        A version that fails leaves every registered array as it was; the
        next older one that the extension restores (restore(older_than=):
        its listing orders the versions) is used only when what the plan was
        made on is the same in it (the same state at the same world size),
        and is then restored pinned the same way; else the load fails naming
        both versions, the targets untouched.
        """
        planned = current = self.last_restore["version_path"]
        skipped = list(self.last_restore.get("fallbacks") or [])  # read_metadata's own
        while True:
            try:
                ck.restore(version=pinned, from_level=self.from_level, verify_before_write=True)
            except (_baton.CorruptCheckpointError, _baton.NotFound) as e:
                failed = [f for f in (ck.last_restore() or {}).get("fallbacks") or []
                          if storage.version_name(f["path"]) == pinned]
                skipped += failed or [{"path": current, "step": None, "reason": str(e),
                                       "code": getattr(e, "code", "Corruption"), "counted": False}]
                try:
                    older = self._planned_on_older(ck, pinned, legacy)
                except (_baton.CorruptCheckpointError, _baton.NotFound) as none:
                    raise _baton.NotFound("BatonReader: %s failed to verify (%s), and no older version could be "
                                          "restored: %s" % (current, e, none)) from none
                if older is None:
                    raise _baton.NotFound("BatonReader: %s failed to verify, and none is older: %s"
                                          % (current, e)) from e
                where, their_skipped, same = older
                skipped += their_skipped
                if not same:
                    raise _baton.CorruptCheckpointError(
                        "BatonReader: the load was planned on %s, which failed to verify (%s); the next older "
                        "version that verifies, %s, holds other DCP Metadata: nothing was loaded (the state is "
                        "as it was); load again (the plan is then made on %s)"
                        % (planned, "; ".join(f["reason"] for f in skipped) or e, where, where)) from e
                current, pinned = where, storage.version_name(where)
                continue
            return dict(ck.last_restore(), fallbacks=skipped)

    def _planned_on_older(self, ck, failed, legacy):
        """(version path, versions skipped, whether the plan holds for it) of the newest version before
        ``failed`` whose plan document reads (the tree in its manifest's user blob, or the pickled Metadata
        of before the one format); None when there is none. Reads nothing into the targets."""
        if self._form == "tree":
            # The older version's manifest alone (its tree in the user blob), found as a restore finds it; its
            # marker is read, verified, with the arrays (read_data checks its value).
            meta = ck.read_metadata(step=self.step, older_than=failed, as_restore=True, from_level=self.from_level)
            if meta is None:
                return None
            return meta["version_path"], list(meta.get("skipped") or []), meta["user_blob"] == self._planned
        meta = ck.read_metadata(step=self.step, older_than=failed)
        if meta is None:
            return None
        shapes = {a["name"]: tuple(a["shape"]) for a in meta["arrays"]}
        if shapes.get(_LEGACY_METADATA) != tuple(legacy.shape):
            return meta["version_path"], [], False
        found = ck.restore(step=self.step, arrays=[_LEGACY_METADATA], older_than=failed, from_level=self.from_level)
        if found is None:
            return None
        info = ck.last_restore()
        return info["version_path"], list(info.get("fallbacks") or []), legacy.numpy().tobytes() == self._planned

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return False

    # --- helpers ----------------------------------------------------------------------------------------
    def _arrays(self, ck, version, known=None):
        """{name: (shape, torch dtype)}, {name: baton dtype} of every array of ``version`` (``known``: its
        read_metadata already, when it is that version's: a version never changes once committed)."""
        meta = known if known is not None and storage.version_name(known["version_path"]) == version else \
            ck.read_metadata(version=version)
        if meta is None:
            raise _baton.NotFound("BatonReader: %s no longer holds %s, which the load was planned on"
                                  % (ck.dir, version))
        return {a["name"]: (tuple(a["shape"]), tensors.torch_dtype(a["dtype"])) for a in meta["arrays"]}, \
            {a["name"]: a["dtype"] for a in meta["arrays"]}

    def _version(self, ck):
        meta = ck.read_metadata(step=self.step, as_restore=True, from_level=self.from_level)
        if meta is None:
            raise _baton.NotFound("BatonReader: %s holds no checkpoint version" % (ck.dir,))
        held = {a["name"] for a in meta["arrays"]}
        if MARKER not in held and _LEGACY_METADATA not in held:
            raise _baton.InvalidArgument(
                "BatonReader: %s (step %d) was not saved from a state dict (its arrays: %s): restore it with "
                "baton.ArrayCheckpointer (restore(step=..., arrays=...))"
                % (meta["version_path"], meta["step"], ", ".join(sorted(held)[:8])))
        return meta


def _agree(ck, error):
    """Raises on every rank when any rank could not plan its reads (``error``: this rank's, or None; collective).

    The planning is each rank's own work (its targets, their shapes) and the
    restore that follows is collective: a rank that raised alone would leave
    the others waiting in it (DCP gathers read_data's outcome only after
    it returns). One small allgather over the directory's communicator, so
    every rank fails, naming the first rank that did, before anything is read.
    """
    said = b"" if error is None else ("%s: %s" % (type(error).__name__, error)).encode("utf-8", "replace")
    failed = [(rank, text.decode("utf-8", "replace"))
              for rank, text in enumerate(ck.allgather_bytes(said, "BatonReader's planned reads")) if text]
    if error is not None:
        raise error
    if failed:
        raise _baton.InvalidArgument("BatonReader: rank %d could not plan its reads, so none was read: %s" % failed[0])


def _saved(value):
    """A BytesIO of torch.save(value): what DCP's planners torch.load for a bytes entry (the tree's own value)."""
    buf = io.BytesIO()
    torch.save(value, buf)
    buf.seek(0)
    return buf
