"""A torch.distributed gloo process group over the launch's ranks, for the DCP tests.

Rendezvous through a torch FileStore in the launch's shared directory
($BATON_PYTEST_TMP): no port to agree on, no MPI call (baton's Runtime
stays the only MPI user of the pytest process). One group per pytest
process; `world()` makes it on first use and `close()` ends it.
"""
import datetime
import os

_made = False


def world(rank, size, tag):
    """The default process group (gloo) of `size` ranks; collective on first use."""
    global _made
    import torch.distributed as dist

    if not dist.is_initialized():
        base = os.environ["BATON_PYTEST_TMP"]
        dist.init_process_group("gloo", init_method="file://" + os.path.join(base, "gloo-store-" + tag),
                                rank=rank, world_size=size, timeout=datetime.timedelta(seconds=300))
        _made = True
    return dist


def close():
    import torch.distributed as dist

    global _made
    if _made and dist.is_initialized():
        dist.destroy_process_group()
    _made = False
