"""baton from Python: checkpoints, the agreed stop and requeue for training programs.

    import baton
    rt = baton.Runtime()                  # MPI (adopted if mpi4py started it), rank, size, should_stop()
    ck = baton.Checkpointer(rt)           # state dicts (registered arrays: baton.ArrayCheckpointer)
    state = {"model": model, "optim": opt, "rng": baton.RNGState()}
    step = ck.restore(state)              # None on a first run
    ...
    ck.save(state, step)
    if rt.should_stop():
        ck.save(state, step)
        sys.exit(baton.EXIT_REQUEUE)

The compiled part is baton._baton (Runtime, ArrayCheckpointer, the errors);
the state-dict layer is pure Python over it. docs/python.md has the whole
story.
"""

from baton._baton import (  # noqa: F401  (the public names)
    EXIT_REQUEUE,
    Aborted,
    ArrayCheckpointer,
    CorruptCheckpointError,
    Error,
    InvalidArgument,
    IOError,
    NotFound,
    Runtime,
    TimeoutError,
    Unavailable,
    __version__,
)
from baton.checkpointer import Checkpointer, SaveFuture  # noqa: F401
from baton.errors import ResizeRefused  # noqa: F401
from baton.distributed import exit_for, init_process_group, requeue_cures  # noqa: F401  (import torch only when called)
from baton.latest import latest  # noqa: F401
from baton.rng import GeneratorState, RNGState  # noqa: F401
from baton.wrappers import PerRank, Sharded  # noqa: F401

__all__ = [
    "EXIT_REQUEUE", "Aborted", "ArrayCheckpointer", "Checkpointer", "CorruptCheckpointError", "Error", "GeneratorState",
    "IOError", "InvalidArgument", "NotFound", "PerRank", "RNGState", "ResizeRefused", "Runtime", "SaveFuture",
    "Sharded", "TimeoutError", "Unavailable", "exit_for", "init_process_group", "latest", "requeue_cures",
]
