"""The staged copy of a dcp.async_save through BatonWriter: the state copied once into CPU memory, and that
memory kept for the directory's next save.

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
(ckpt/staging_pool.h). The memory: one copy of the rank's tensors, held
by the directory's open checkpointer (open_checkpointers.Entry) until it
closes; BatonWriter(cache_staged_state_dict=False) frees it after each
save, as DCP's default does.

What is copied is what DCP's stager copies, in the same structure: dicts,
lists and tuples rebuilt, tensors (and a DTensor's local tensor, its
spec kept: mesh, placements, global shape and stride) into CPU memory, ints,
floats, strings, bytes, None and io.BytesIO as they are, anything else
deep-copied. A ShardedTensor goes through DCP's own functions.

Threading: staged() runs on the program's thread, after the directory's
save in flight ended (open_checkpointers.open_for_save waits for it), so
no save reads a kept buffer while it is written again. It holds the
buffers until its caller has recorded the new save as the one in flight
(BatonWriter.stage), and asks again, once it holds them, that no save is
in flight: a second program thread that stages for the same directory
meanwhile gets new memory and leaves the kept buffers alone, rather than
copying over a copy a save is about to read.
"""
import contextlib
import copy
import io
import sys
import threading

from baton.dtensor_chunks import is_dtensor, local_tensor


class StagingBuffers:
    """The CPU buffers of the directory's last staged save, by their place in the state (a path of keys)."""

    def __init__(self):
        self._kept = {}  # path -> tensor
        self._lock = threading.Lock()  # held by the staging that may write the kept buffers

    @contextlib.contextmanager
    def staged(self, state_dict, keep=True, free=lambda: True):
        """A copy of ``state_dict`` in CPU memory nobody else writes, the buffers held until the block ends;
        ``keep``: its buffers serve the next staging (else none is kept, and those kept before are dropped).
        ``free()``, asked once the buffers are held: whether no save reads them now. While another staging
        holds them, or where they are not free, the copy is made in new memory and the kept ones stay."""
        mine = self._lock.acquire(blocking=False)
        try:
            yield self._stage(state_dict, keep, mine and free())
        finally:
            if mine:
                self._lock.release()

    def stage(self, state_dict, keep=True):
        """staged() for a caller with nothing to record before the buffers are free again."""
        with self.staged(state_dict, keep) as staged:
            return staged

    def _stage(self, state_dict, keep, holds_buffers):
        torch = sys.modules["torch"]
        used = {}
        with torch.no_grad():
            staged = _Copier(self._kept if keep and holds_buffers else {}, used).value(state_dict, ())
        if holds_buffers:
            self._kept = used if keep else {}
        return staged

    def nbytes(self):
        """The bytes of the buffers kept for the next save."""
        return sum(t.numel() * t.element_size() for t in self._kept.values())

    def clear(self):
        self._kept = {}


class _Copier:
    def __init__(self, kept, used):
        self.kept = kept
        self.used = used

    def value(self, obj, path):
        torch = sys.modules["torch"]
        if _is_sharded_tensor(obj):
            return _dcp_staged(obj)
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


def _dcp_staged(obj):
    """A ShardedTensor (deprecated in torch) staged as DCP's stager stages it: new memory every save."""
    from torch.distributed._state_dict_utils import _copy_state_dict, _create_cpu_state_dict
    return _copy_state_dict({"v": obj}, _create_cpu_state_dict({"v": obj}), type_check=False)["v"]
