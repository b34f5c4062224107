"""The staged copy of a dcp.async_save through BatonWriter: the state copied once into CPU memory, and that
memory kept for the process's next async save.

DCP's own stager (torch 2.15's BlockingAsyncStager, by default:
_create_cpu_state_dict, then _copy_state_dict) allocates new memory at
every save and, for a DTensor, first deep-copies the whole DTensor, its
data included, before it swaps the copy's local tensor for an empty one:
an FSDP2 state was copied twice per save, and every page of the fresh
memory faulted in again at every save (python/bench/bench_vs_dcp.py, FSDP2
256 MiB: 102 ms of the 155 ms async_save blocked in
_create_cpu_state_dict, 44 ms in the copy). Here each tensor is copied
once, into a buffer kept from the save before where the tensor at that
place of the state has the same shape and dtype: a training loop's state
keeps its layout, so its staging memory is allocated and faulted in once,
as the C++ checkpointer's SaveAsync keeps its staging copy
(ckpt/staging_pool.h). The memory: one copy of the rank's tensors for the
process (open_checkpointers.staging()), whichever directories it saves
into, until BatonWriter.close(); BatonWriter(cache_staged_state_dict=False)
keeps none, as DCP's default.

What is copied is what DCP's stager copies, in the same structure: dicts,
lists and tuples rebuilt, tensors (and a DTensor's local tensor, its
spec kept: mesh, placements, global shape and stride) into CPU memory, ints,
floats, strings, bytes, None and io.BytesIO as they are, anything else
deep-copied; a ShardedTensor whole (deep-copied, or moved to the CPU),
where torch 2.5's stager handed back the live one.

Threading: the kept buffers record the save that reads them (its
open_checkpointers.InFlight); a staging uses them only once that save
will read them no more, else it copies into new memory and leaves them
as they are. So a save in flight on another directory, a save whose
dcp.async_save was interrupted, or a second program thread staging at the
same moment never has its copy written over.
"""
import copy
import io
import sys
import threading

from baton.dtensor_chunks import is_dtensor, local_tensor


class StagingBuffers:
    """The CPU buffers of the last staged save, by their place in the state (a path of keys), and that save."""

    def __init__(self):
        self._kept = {}  # path -> tensor
        self._reader = None  # the save that reads the kept buffers (done(): it reads them no more), or None
        self._lock = threading.Lock()  # held while a staging decides on, and writes, the kept buffers

    def stage(self, state_dict, reader=None, keep=True):
        """A copy of ``state_dict`` in CPU memory nobody else writes, for the save ``reader`` (an object whose
        done() says it reads the copy no more; None: a caller that keeps the copy to itself, nothing kept).
        ``keep``: the copy's buffers serve the next staging (else none is kept, and those kept before are
        dropped). Where the kept buffers are still read (or another thread is staging into them), the copy
        is made in new memory and they stay as they are."""
        torch = sys.modules["torch"]
        used = {}
        mine = self._lock.acquire(blocking=False)
        try:
            pooled = mine and (self._reader is None or self._reader.done())
            with torch.no_grad():
                staged = _Copier(self._kept if pooled and keep else {}, used).value(state_dict, ())
            if pooled:
                keep = keep and reader is not None
                self._kept, self._reader = (used, reader) if keep else ({}, None)
            return staged
        finally:
            if mine:
                self._lock.release()

    def nbytes(self):
        """The bytes of the buffers kept for the next save."""
        return sum(t.numel() * t.element_size() for t in self._kept.values())

    def clear(self):
        """Drops the kept buffers (a save still reading them holds its own references)."""
        with self._lock:
            self._kept, self._reader = {}, None


class _Copier:
    def __init__(self, kept, used):
        self.kept = kept
        self.used = used

    def value(self, obj, path):
        torch = sys.modules["torch"]
        if _is_sharded_tensor(obj):
            return _sharded_copy(obj)
        if is_dtensor(obj):
            return self.dtensor(obj, path)
        if isinstance(obj, torch.Tensor):
            return self.buffer(obj, path)
        if obj is None or isinstance(obj, (int, float, str, bytes, io.BytesIO)):
            return obj
        if isinstance(obj, dict):
            return {k: self.value(v, path + (k,)) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            items = [self.value(v, path + (i,)) for i, v in enumerate(obj)]
            return tuple(items) if isinstance(obj, tuple) else items
        return copy.deepcopy(obj)

    def dtensor(self, dt, path):
        from torch.distributed.tensor import DTensor
        local = self.buffer(local_tensor(dt), path)
        # The DTensor's own spec (mesh, placements, global shape and stride) over the copy, made as DCP's
        # stager makes its copy (a DTensor whose local tensor is in CPU memory, on a GPU's mesh too), not by
        # DTensor.from_local, which would move the copy back to the mesh's device.
        return DTensor(local, dt._spec, requires_grad=False)

    def buffer(self, t, path):
        """``t`` copied into the buffer kept at ``path`` (same shape and dtype), else into a new one."""
        torch = sys.modules["torch"]
        buf = self.kept.get(path)
        if buf is None or path in self.used or buf.shape != t.shape or buf.dtype != t.dtype:
            buf = torch.empty(t.shape, dtype=t.dtype, device="cpu")
        # Synchronous, also from a GPU: the buffer is pageable memory, and the copy is whole once this returns.
        buf.copy_(t.detach())
        self.used[path] = buf
        return buf


def _is_sharded_tensor(obj):
    module = sys.modules.get("torch.distributed._shard.sharded_tensor")
    cls = getattr(module, "ShardedTensor", None) if module is not None else None
    return cls is not None and isinstance(obj, cls)


def _sharded_copy(obj):
    """A ShardedTensor (deprecated in torch) copied whole, as torch 2.15's stager copies one (torch 2.5's handed
    back the live one): moved to the CPU (a copy) where a local shard is elsewhere, else deep-copied."""
    if any(shard.tensor.device.type != "cpu" for shard in obj.local_shards()):
        return obj.cpu()
    return copy.deepcopy(obj)
