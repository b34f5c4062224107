"""BatonReader: torch.distributed.checkpoint loads from baton's format.

    dcp.load(state_dict, storage_reader=baton.dcp.BatonReader("/shared/ckpt"))

read_metadata restores the version's stored DCP Metadata (baton's restore:
the newest version every rank can read and verify); read_data registers,
per rank, only the rows of the chunks its ReadItems need and restores them
in one collective baton Restore into scratch memory (whole HDF5 chunks
read, each verified by its xxh3 before a byte is used), then copies the
pieces into DCP's targets, only once everything verified: a load that fails
leaves the program's tensors as they were. Nothing pickled in a checkpoint
runs code: the Metadata and the bytes entries are read by
baton.dcp.safe_unpickle (what torch.load(weights_only=True) allows), or the
load is refused naming the entry.
A version whose chunks fail verification is skipped for the next older
one, as baton.ArrayCheckpointer.restore does; the plan made from the newer
version's Metadata is used for the older one only when both Metadata are
the same (the same state at the same world size), else the load fails
naming both versions.
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
from baton.names import MARKER
from baton.restore_match import decode_tree
from baton.dcp import safe_unpickle, state_tree
from baton.dtensor_chunks import row_span, stored_piece
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
    (whole chunks, each verified) and `metadata_bytes` the size of the
    stored DCP Metadata, which every rank reads in full at each load.
    """

    def __init__(self, path=None, *, step=None, runtime=None, from_level=0, **options):
        super().__init__()
        self.path = path
        self.step = step
        self.from_level = from_level
        self.last_restore = None
        self.bytes_read = None
        self.metadata_bytes = None
        self._runtime = runtime
        self._options = options
        self._metadata = None
        self._planned = None  # what the plan was made on: the version's tree (user blob), or its pickled Metadata
        self._values = None   # the tree's values by fqn (DCP's bytes entries)
        self._form = None     # "tree", or "dcp" (a version BatonWriter wrote before the one format (2026-12-06))
        # The checkpointer read_metadata opened, kept for read_data: one open per load (an open is
        # collective: the directory checked on rank 0, communicators duplicated). read_data closes it;
        # a load that stops in between (DCP's planning failed) leaves it to the next reset or load.
        self._ck = None

    # --- DCP's protocol ---------------------------------------------------------------------------------
    def reset(self, checkpoint_id=None):
        if checkpoint_id is not None:
            self.path = checkpoint_id
        self._close()
        self._metadata = self._planned = self._values = self._form = None

    def _close(self):
        ck, self._ck = self._ck, None
        if ck is not None:
            ck.close()

    def _open(self):
        rt = runtimes.resolve(self._runtime)
        runtimes.check_world(rt, "BatonReader")
        # A reader creates nothing and writes nothing where it reads (storage.read_only_options).
        return storage.open_read_only(rt, dir=self.path, **self._options)

    def read_metadata(self):  # no **kwargs: DCP would retry with rank= for rank-local metadata baton has not
        self._close()
        ck = self._open()
        try:
            meta = self._version(ck)
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
        """The version's state-dict tree (every writer's form) as DCP Metadata (state_tree.dcp_view)."""
        marker = np.zeros((), np.int64)
        ck.register_replicated(MARKER, marker, dtype="i64")
        ck.restore(step=self.step, arrays=[MARKER], from_level=self.from_level)
        self.last_restore = ck.last_restore()
        blob = ck.user_blob
        where = self.last_restore["version_path"]
        if storage.version_name(where) != storage.version_name(meta["version_path"]):
            meta = ck.read_metadata(version=storage.version_name(where))  # a newer one failed: this one's arrays
        try:
            if int(marker) != VERSION:
                raise metadata.FormatError("its state-dict form is version %d; this baton reads version %d"
                                           % (int(marker), VERSION))
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
        blob = np.zeros(self._shapes(ck)[_LEGACY_METADATA][0], np.uint8)
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

    def read_data(self, plan, planner):
        md = self._metadata
        chunk_sizes = {}
        for fqn, entry in md.state_dict_metadata.items():
            if isinstance(entry, TensorStorageMetadata):
                for c in entry.chunks:
                    chunk_sizes[(fqn, tuple(c.offsets))] = (tuple(c.sizes), entry.properties.dtype)
        # Per array: the rows of dim 0 this rank's items need (one range per array).
        wanted = defaultdict(list)
        for item in plan.items:
            if self._form == "tree" and item.type == LoadItemType.BYTE_IO:
                continue  # a value of the tree: no array (below)
            wanted[md.storage_data[item.storage_index]].append(item)
        ck, self._ck = self._ck, None
        if ck is None or ck.closed:
            ck = self._open()
        try:
            arrays, baton_dtypes = self._arrays(ck)
            # Every array is read into scratch memory, never into DCP's targets: a restore that fails
            # verification (and a fallback that cannot be used) leaves the program's tensors as they were.
            buffers = {}
            for name, items in wanted.items():
                if name not in arrays:
                    raise _baton.CorruptCheckpointError(
                        "BatonReader: %s names array %r for %r, which the version does not hold"
                        % (self.path, name, items[0].storage_index.fqn))
                shape = arrays[name][0]
                if items[0].type == LoadItemType.BYTE_IO:
                    buffers[name] = (torch.empty(shape, dtype=torch.uint8), 0)
                    continue
                sizes, dtype = chunk_sizes[(items[0].storage_index.fqn, tuple(items[0].storage_index.offset))]
                logical = tuple(sizes) or (1,)
                if shape != stored_form.stored_shape(logical, dtype) and not (shape == () and sizes == ()):
                    raise _baton.CorruptCheckpointError(
                        "BatonReader: array %r has shape %s, its DCP chunk %s (%s)" % (name, shape, tuple(sizes), dtype))
                first, end = row_span(items) if sizes else (0, 1)
                buffers[name] = (torch.empty((end - first,) + logical[1:], dtype=dtype), first)
            # The restore is collective and the ranks must register the same
            # arrays: every array of the version, with the rows this rank
            # needs (none for most), and the metadata in full to check it.
            # and what the plan was made on, to check it is what was restored.
            marker = np.zeros((), np.int64)
            if self._form == "tree":
                ck.register_replicated(MARKER, marker, dtype="i64")
            else:
                blob = torch.empty(arrays[_LEGACY_METADATA][0], dtype=torch.uint8)
                buffers[_LEGACY_METADATA] = (blob, 0)
            for name, (shape, dtype) in arrays.items():
                if name == MARKER and self._form == "tree":
                    continue
                buf, first = buffers.get(name) or (torch.empty((0,) + shape[1:], dtype=dtype), 0)
                if shape == ():
                    # A 0-d tensor a Checkpointer saved replicated (no dim 0 to take rows of): every rank
                    # reads its one element.
                    buf = buf.reshape(()) if buf.numel() == 1 else torch.empty((), dtype=dtype)
                    ck.register_replicated(name, buf.view(torch.uint8) if buf.dtype.itemsize == 1 and
                                           buf.dtype != torch.uint8 and buf.dtype != torch.int8 else buf,
                                           dtype=baton_dtypes[name])
                    continue
                stored_form.register(ck, name, buf, first, shape)
            ck.restore(step=self.step, from_level=self.from_level)
            restored = ck.last_restore()
            self.bytes_read = ck.last_stats().get("bytes_read")
            planned_on = ck.user_blob if self._form == "tree" else blob.numpy().tobytes()
        finally:
            ck.close()
        buffers.pop(_LEGACY_METADATA, None)
        if planned_on != self._planned:
            raise _baton.CorruptCheckpointError(
                "BatonReader: the load was planned on %s and restored %s (a newer one failed to verify: %s), whose "
                "DCP Metadata differs; load again (the plan is then made on %s)"
                % (self.last_restore and self.last_restore["version_path"], restored["version_path"],
                   "; ".join(f["reason"] for f in restored["fallbacks"]) or "none", restored["version_path"]))
        self.last_restore = restored
        # Everything that can refuse is done before the first byte reaches a target: the bytes
        # entries read (DCP's planners torch.load them with weights_only=False, so they get only
        # what weights_only=True read, saved again: baton.dcp.safe_unpickle) and the pieces' shapes.
        byte_values, copies = {}, []
        for name, items in wanted.items():
            buf, first = buffers[name]
            for item in items:
                if item.type == LoadItemType.BYTE_IO:
                    byte_values[id(item)] = safe_unpickle.resaved(  # a version of before the one format (2026-12-06)
                        buf.numpy().tobytes(), "%s: the bytes entry %r (array %r of %s)"
                        % (self.path, item.dest_index.fqn, name, restored["version_path"]))
                    continue
                src = stored_piece(buf, first, item)
                target = planner.resolve_tensor(item).detach()
                if target.size() != src.size():
                    raise _baton.InvalidArgument(
                        "BatonReader: %r: the target piece has shape %s, the stored piece %s"
                        % (item.dest_index.fqn, tuple(target.size()), tuple(src.size())))
                copies.append((item, target, src))
        if self._form == "tree":
            for item in plan.items:
                if item.type == LoadItemType.BYTE_IO:
                    byte_values[id(item)] = _saved(self._values[item.storage_index.fqn])
        for item in plan.items:
            if item.type == LoadItemType.BYTE_IO:
                planner.load_bytes(item, byte_values[id(item)])
        for item, target, src in copies:
            target.copy_(src)
            planner.commit_tensor(item, target)
        future = Future()
        future.set_result(None)
        return future

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return False

    # --- helpers ----------------------------------------------------------------------------------------
    def _arrays(self, ck):
        """{name: (shape, torch dtype)} of every array of the version restore would take."""
        meta = self._version(ck)
        return {a["name"]: (tuple(a["shape"]), tensors.torch_dtype(a["dtype"])) for a in meta["arrays"]}, \
            {a["name"]: a["dtype"] for a in meta["arrays"]}

    def _shapes(self, ck):
        return {a["name"]: tuple(a["shape"]) for a in self._version(ck)["arrays"]}

    def _version(self, ck):
        meta = ck.read_metadata(step=self.step)
        if meta is None:
            raise _baton.NotFound("BatonReader: %s holds no checkpoint version" % (ck.dir,))
        held = {a["name"] for a in meta["arrays"]}
        if MARKER not in held and _LEGACY_METADATA not in held:
            raise _baton.InvalidArgument(
                "BatonReader: %s (step %d) was not saved from a state dict (its arrays: %s): restore it with "
                "baton.ArrayCheckpointer (restore(step=..., arrays=...))"
                % (meta["version_path"], meta["step"], ", ".join(sorted(held)[:8])))
        return meta


def _saved(value):
    """A BytesIO of torch.save(value): what DCP's planners torch.load for a bytes entry (the tree's own value)."""
    buf = io.BytesIO()
    torch.save(value, buf)
    buf.seek(0)
    return buf
