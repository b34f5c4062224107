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
    """The Runtime's world is torch.distributed's: same size, same rank.

    Over more than one rank torch.distributed must be initialized: without
    it DCP plans each rank alone (no_dist), every rank claims every chunk,
    and baton's collective save or restore then failed with "the ranks
    registered different arrays" or "rows overlap" (issue 46 defect 14).
    Refused here, on every rank alike, before anything collective."""
    import torch.distributed as dist

    if runtime.size > 1 and not (dist.is_available() and dist.is_initialized()):
        raise _baton.InvalidArgument(
            "%s: torch.distributed is not initialized on rank %d of %d: DCP plans the ranks' chunks together "
            "through it; call baton.init_process_group(runtime) (or torch.distributed.init_process_group) first"
            % (what, runtime.rank, runtime.size))
    if dist.is_available() and dist.is_initialized():
        if (dist.get_world_size(), dist.get_rank()) != (runtime.size, runtime.rank):
            raise _baton.InvalidArgument(
                "%s: torch.distributed's world is rank %d of %d, baton's Runtime is rank %d of %d: DCP's plan and "
                "baton's checkpointer must see the same processes in the same order"
                % (what, dist.get_rank(), dist.get_world_size(), runtime.rank, runtime.size))
