"""A torch.distributed gloo process group over the launch's ranks, for the DCP tests.

Rendezvous through a torch FileStore in the launch's shared directory
($BATON_PYTEST_TMP): no port to agree on, no MPI call (baton's Runtime
stays the only MPI user of the pytest process). One group per pytest
process; `world()` makes it on first use and `close()` ends it.
"""
import contextlib
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


def reshard_launch(dir_variable, mesh_variable):
    """(rank, size, directory, mesh shape) of one phase of tests/python/dcp-reshard.sh,
    whose scripts run under mpirun outside run-pytest: the directory and the mesh
    ("4", "2x2"...; default: the launch's size) come from the two variables."""
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    directory = os.environ.get(dir_variable, "")
    mesh = tuple(int(n) for n in os.environ.get(mesh_variable, str(size)).split("x"))
    return rank, size, directory, mesh


@contextlib.contextmanager
def reshard_world(rank, size, directory, mesh):
    """gloo over a FileStore in `directory` (one store per mesh and size, so that
    the save and the restore phases do not meet) and a baton Runtime, both ended after."""
    import torch.distributed as dist
    from baton import _baton

    dist.init_process_group("gloo", init_method="file://%s/store-%s-%d" % (directory, "x".join(map(str, mesh)), size),
                            rank=rank, world_size=size, timeout=datetime.timedelta(seconds=60))
    rt = _baton.Runtime()
    try:
        yield rt
    finally:
        rt.close()
        dist.destroy_process_group()
