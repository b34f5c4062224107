"""The baton Runtime a DCP storage backend uses when the program gives none.

DCP's own collectives go through torch.distributed; baton's checkpointer
needs MPI's world (baton.Runtime), the same processes in the same order.
One Runtime per process serves every BatonWriter and BatonReader that was
not given one: the program's own (the first it made that is still open),
else one made here on first use and kept (issue 46 item 11: a second
Runtime beside the program's was made before).
"""
import threading

from baton import _baton

_lock = threading.Lock()
_default = None


def resolve(runtime):
    """`runtime`, or the process's baton.Runtime (the program's, else one made on first use)."""
    global _default
    if runtime is not None:
        return runtime
    with _lock:
        made = _baton._process_runtime()
        if made is not None:
            return made
        if _default is None or _default.closed:
            _default = _baton.Runtime()
        return _default


def check_world(runtime, what):
    """The Runtime's world is torch.distributed's (when that is initialized): same size, same rank."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        if (dist.get_world_size(), dist.get_rank()) != (runtime.size, runtime.rank):
            raise _baton.InvalidArgument(
                "%s: torch.distributed's world is rank %d of %d, baton's Runtime is rank %d of %d: DCP's plan and "
                "baton's checkpointer must see the same processes in the same order"
                % (what, dist.get_rank(), dist.get_world_size(), runtime.rank, runtime.size))
