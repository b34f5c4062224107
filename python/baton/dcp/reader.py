"""BatonReader: torch.distributed.checkpoint loads from baton's format.

    dcp.load(state_dict, storage_reader=baton.dcp.BatonReader("/shared/ckpt"))

read_metadata restores the version's stored DCP Metadata (baton's restore:
the newest version every rank can read and verify); read_data registers,
per rank, only the rows of the chunks its ReadItems need and restores them
in one collective baton Restore (whole HDF5 chunks read, each verified by
its xxh3 before a byte is used), then copies the pieces into the targets.
A version whose chunks fail verification is skipped for the next older
one, as baton.ArrayCheckpointer.restore does; the plan made from the newer
version's Metadata is used for the older one only when both Metadata are
the same (the same state at the same world size), else the load fails
naming both versions.
"""
import io
import pickle
from collections import defaultdict

import numpy as np
import torch
from torch.distributed.checkpoint.metadata import TensorStorageMetadata
from torch.distributed.checkpoint.planner import LoadItemType
from torch.distributed.checkpoint.storage import StorageReader
from torch.futures import Future

from baton import _baton
from baton.dtensor_chunks import row_span, stored_piece
from baton.dcp import names, runtime as runtimes

# baton's dtype names (ArrayCheckpointer.read_metadata) as torch dtypes.
_TORCH_DTYPES = {
    "f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16, "f16": torch.float16,
    "i8": torch.int8, "i16": torch.int16, "i32": torch.int32, "i64": torch.int64,
    "u8": torch.uint8, "u16": torch.uint16, "u32": torch.uint32, "u64": torch.uint64, "bool": torch.bool,
    "f8e4m3": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2,
}


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
        self._metadata_bytes = None

    # --- DCP's protocol ---------------------------------------------------------------------------------
    def reset(self, checkpoint_id=None):
        if checkpoint_id is not None:
            self.path = checkpoint_id
        self._metadata = self._metadata_bytes = None

    def _open(self):
        rt = runtimes.resolve(self._runtime)
        runtimes.check_world(rt, "BatonReader")
        return _baton.ArrayCheckpointer(rt, dir=self.path, **self._options)

    def read_metadata(self):  # no **kwargs: DCP would retry with rank= for rank-local metadata baton has not
        ck = self._open()
        try:
            shapes = self._shapes(ck)
            blob = np.zeros(shapes[names.METADATA][0], np.uint8)
            ck.register_sharded(names.METADATA, blob, offset=0, global_shape=[blob.size])
            ck.restore(step=self.step, arrays=[names.METADATA], from_level=self.from_level)
            self.last_restore = ck.last_restore()
        finally:
            ck.close()
        self._metadata_bytes = blob.tobytes()
        self.metadata_bytes = len(self._metadata_bytes)
        self._metadata = pickle.loads(self._metadata_bytes)
        return self._metadata

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
            wanted[md.storage_data[item.storage_index]].append(item)
        ck = self._open()
        direct_targets = self._direct = {}
        try:
            arrays = self._arrays(ck)
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
                if shape != (tuple(sizes) or (1,)):
                    raise _baton.CorruptCheckpointError(
                        "BatonReader: array %r has shape %s, its DCP chunk %s" % (name, shape, tuple(sizes)))
                direct = self._direct_target(items, shape, dtype, planner)
                if direct is not None:
                    buffers[name] = direct
                    continue
                first, end = row_span(items) if sizes else (0, 1)
                buffers[name] = (torch.empty((end - first,) + shape[1:], dtype=dtype), first)
            # The restore is collective and the ranks must register the same
            # arrays: every array of the version, with the rows this rank
            # needs (none for most), and the metadata in full to check it.
            blob = torch.empty(arrays[names.METADATA][0], dtype=torch.uint8)
            buffers[names.METADATA] = (blob, 0)
            for name, (shape, dtype) in arrays.items():
                buf, first = buffers.get(name) or (torch.empty((0,) + shape[1:], dtype=dtype), 0)
                ck.register_sharded(name, buf, offset=first, global_shape=list(shape))
            ck.restore(step=self.step, from_level=self.from_level)
            restored = ck.last_restore()
            self.bytes_read = ck.last_stats().get("bytes_read")
        finally:
            ck.close()
        del buffers[names.METADATA]
        if blob.numpy().tobytes() != self._metadata_bytes:
            raise _baton.CorruptCheckpointError(
                "BatonReader: the load was planned on %s and restored %s (a newer one failed to verify: %s), whose "
                "DCP Metadata differs; load again (the plan is then made on %s)"
                % (self.last_restore and self.last_restore["version_path"], restored["version_path"],
                   "; ".join(f["reason"] for f in restored["fallbacks"]) or "none", restored["version_path"]))
        self.last_restore = restored
        for name, items in wanted.items():
            buf, first = buffers[name]
            if name in direct_targets:
                planner.commit_tensor(items[0], direct_targets[name])
                continue
            for item in items:
                if item.type == LoadItemType.BYTE_IO:
                    planner.load_bytes(item, io.BytesIO(buf.numpy().tobytes()))
                    continue
                src = stored_piece(buf, first, item)
                target = planner.resolve_tensor(item).detach()
                if target.size() != src.size():
                    raise _baton.InvalidArgument(
                        "BatonReader: %r: the target piece has shape %s, the stored piece %s"
                        % (item.dest_index.fqn, tuple(target.size()), tuple(src.size())))
                target.copy_(src)
                planner.commit_tensor(item, target)
        future = Future()
        future.set_result(None)
        return future

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return False

    # --- helpers ----------------------------------------------------------------------------------------
    def _direct_target(self, items, shape, dtype, planner):
        """(target, first row) when the restore can read straight into DCP's target, else None.

        So when this rank's only piece of the array is whole rows of it
        (every dim after the first complete) and the target piece is a
        contiguous tensor of the array's dtype: the usual case (a replicated
        tensor, an FSDP2 shard read at the same or a multiple world size);
        no staging buffer, no copy. Otherwise the rows are read into a
        buffer and the pieces copied (a Shard(1) split at another size).
        """
        if len(items) != 1 or len(items[0].lengths) == 0:
            return None
        item = items[0]
        if any(int(o) != 0 for o in item.storage_offsets[1:]) or tuple(int(n) for n in item.lengths[1:]) != shape[1:]:
            return None
        target = planner.resolve_tensor(item).detach()
        if target.dtype != dtype or target.device.type != "cpu" or not target.is_contiguous():
            return None
        self._direct[self._name_of(item)] = target
        return target, int(item.storage_offsets[0])

    def _name_of(self, item):
        return self._metadata.storage_data[item.storage_index]

    def _arrays(self, ck):
        """{name: (shape, torch dtype)} of every array of the version restore would take."""
        meta = self._version(ck)
        return {a["name"]: (tuple(a["shape"]), _TORCH_DTYPES[a["dtype"]]) for a in meta["arrays"]}

    def _shapes(self, ck):
        return {a["name"]: tuple(a["shape"]) for a in self._version(ck)["arrays"]}

    def _version(self, ck):
        meta = ck.read_metadata(step=self.step)
        if meta is None:
            raise _baton.NotFound("BatonReader: %s holds no checkpoint version" % (ck.dir,))
        if names.METADATA not in {a["name"] for a in meta["arrays"]}:
            raise _baton.InvalidArgument(
                "BatonReader: %s (step %d) was not written through DCP (no %r array): restore it with "
                "baton.Checkpointer" % (meta["version_path"], meta["step"], names.METADATA))
        return meta
