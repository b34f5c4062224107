"""torch.distributed's process group, set up from baton's Runtime.

    rt = baton.Runtime()
    baton.init_process_group(rt)          # gloo on CPU, nccl where CUDA is
    # or: baton.init_process_group(rt, backend="gloo", timeout=120)

One program then runs under ``srun --baton``, in an ``sbatch --baton`` job
and under ``mpirun`` alike. The rank and the world size are the Runtime's.
The place where the ranks meet comes from

  * the SPANK plugin's variables (RANK, WORLD_SIZE, MASTER_ADDR,
    MASTER_PORT: ``srun --baton``) when all four are set; RANK and
    WORLD_SIZE must then be the Runtime's, else the call refuses before
    connecting, naming both (a program started by another launcher than
    its MPI);
  * else an agreement over MPI: rank 0 opens torch's TCPStore on a port the
    kernel picks (no race for a "free" port), and sends its address and the
    port to the others with a non-blocking broadcast that waits at most
    ``timeout`` seconds.

torch is imported inside the calls, not with ``import baton``: programs
that use baton without torch.distributed do not pay for it.
"""

import datetime
import os
import socket
import time

from baton import _baton

_PLUGIN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
_ADDRESS_BYTES = 1024  # the broadcast buffer: "host:port", zero-padded


def init_process_group(runtime, backend=None, timeout=None, **kwargs):
    """Starts torch.distributed's default process group for the Runtime's ranks (collective).

    ``backend``: "gloo", "nccl", ... (None: nccl where CUDA is available,
    else gloo). ``timeout``: seconds that the set-up, and later each of
    torch's collectives, may wait for the other ranks (None: the Runtime's
    collective_timeout). ``kwargs`` go to torch.distributed.init_process_group.

    Returns where the ranks met, as "host:port". Raises
    baton.InvalidArgument for a bad argument or plugin variables that
    contradict the Runtime, baton.TimeoutError when the other ranks did not
    come in time, baton.Unavailable when rank 0's address cannot be
    reached. A process group that exists already is kept when it has the
    Runtime's rank and size (and refused otherwise).
    """
    import torch
    import torch.distributed as dist

    rank, size = runtime.rank, runtime.size
    if dist.is_initialized():
        if dist.get_rank() != rank or dist.get_world_size() != size:
            raise _baton.InvalidArgument(
                f"init_process_group: torch.distributed is set up already as rank {dist.get_rank()} of "
                f"{dist.get_world_size()}, baton's Runtime is rank {rank} of {size}")
        return None
    seconds = runtime.collective_timeout if timeout is None else timeout
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise _baton.InvalidArgument(f"init_process_group: timeout={seconds!r} must be a positive number of seconds")
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    delta = datetime.timedelta(seconds=seconds)

    plugin = _plugin_address(rank, size)
    try:
        if plugin is not None:
            dist.init_process_group(backend, init_method="env://", rank=rank, world_size=size, timeout=delta,
                                    **kwargs)
            return plugin
        host, port, store = _agree_over_mpi(rank, size, seconds)
        dist.init_process_group(backend, store=store, rank=rank, world_size=size, timeout=delta, **kwargs)
        return f"{host}:{port}"
    except _baton.Error:
        raise
    except (RuntimeError, ValueError) as e:
        baton_error = _translate(e, rank, seconds)
        if baton_error is None:
            raise
        raise baton_error from e


def _plugin_address(rank, size):
    """MASTER_ADDR:MASTER_PORT where the plugin set all four variables (and they fit), else None."""
    env = {k: os.environ.get(k) for k in _PLUGIN_VARS}
    if any(v is None or v == "" for v in env.values()):
        return None
    try:
        env_rank, env_size = int(env["RANK"]), int(env["WORLD_SIZE"])
    except ValueError:
        raise _baton.InvalidArgument(f"init_process_group: RANK={env['RANK']!r} and WORLD_SIZE={env['WORLD_SIZE']!r} "
                                     "must be integers") from None
    if (env_rank, env_size) != (rank, size):
        raise _baton.InvalidArgument(
            f"init_process_group: the environment says RANK={env_rank} of WORLD_SIZE={env_size}, baton's Runtime "
            f"(MPI) rank {rank} of {size}: launch the program with one launcher (srun --baton, or mpirun "
            "without RANK/WORLD_SIZE exported)")
    return f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}"


def _agree_over_mpi(rank, size, seconds):
    """Rank 0's TCPStore address and port, agreed over MPI within ``seconds``; returns (host, port, store)."""
    from mpi4py import MPI
    from torch.distributed import TCPStore

    deadline = time.monotonic() + seconds
    store = None
    buf = bytearray(_ADDRESS_BYTES)
    if rank == 0:
        # MASTER_ADDR where the batch script has it (sbatch --baton: rank 0's
        # node as the cluster's network names it), else this host's name.
        host = os.environ.get("MASTER_ADDR") or socket.gethostname()
        store = TCPStore(host, 0, size, is_master=True, timeout=datetime.timedelta(seconds=seconds),
                         wait_for_workers=False)
        text = f"{host}:{store.port}".encode()
        if len(text) > _ADDRESS_BYTES:
            raise _baton.InvalidArgument(f"init_process_group: rank 0's address {text!r} is longer than "
                                         f"{_ADDRESS_BYTES} bytes")
        buf[:len(text)] = text
    _bounded_bcast(MPI, buf, deadline, seconds, rank)
    host, _, port = bytes(buf).rstrip(b"\0").decode().rpartition(":")
    if rank != 0:
        left = max(deadline - time.monotonic(), 1.0)
        store = TCPStore(host, int(port), size, is_master=False, timeout=datetime.timedelta(seconds=left))
    return host, int(port), store


def _bounded_bcast(MPI, buf, deadline, seconds, rank):
    """MPI_Ibcast from rank 0, polled until done or the deadline (a blocking one could wait forever)."""
    comm = MPI.COMM_WORLD
    req = comm.Ibcast([buf, MPI.BYTE], root=0)
    pause = 0.0005
    while not req.Test():
        if time.monotonic() > deadline:
            # The request stays posted: MPI cannot cancel a collective. The
            # caller fails (and, in a training program, the process ends).
            raise _baton.TimeoutError(
                f"init_process_group: rank {rank} waited {seconds:g} s for rank 0's address over MPI; some rank "
                "did not call init_process_group")
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _translate(error, rank, seconds):
    """torch's store and connection errors as baton's (TimeoutError, Unavailable); None for any other error."""
    text = str(error)
    if "timed out" in text.lower() or "timeout" in text.lower():
        return _baton.TimeoutError(f"init_process_group: rank {rank}: the other ranks did not connect within "
                                   f"{seconds:g} s: {text.splitlines()[0] if text else type(error).__name__}")
    if type(error).__name__ in ("DistNetworkError", "DistStoreError"):
        return _baton.Unavailable(f"init_process_group: rank {rank}: {text.splitlines()[0]}")
    return None


# What torch's backends say when a peer is gone (gloo: the connection, a
# receive's deadline; NCCL: the remote error, the watchdog's abort). torch
# raises these as a plain RuntimeError (gloo) or a DistBackendError.
_LOST_PEER_TEXT = ("connection closed by peer", "connection reset by peer", "connection refused", "broken pipe",
                   "timed out", "timeout", "ncclremoteerror", "nccl communicator was aborted",
                   "watchdog caught collective operation timeout")


def requeue_cures(error):
    """Whether a requeue (exit 75) can cure ``error``: a lost peer or a transient failure, not a bug.

    True for baton's Unavailable, TimeoutError, Aborted and IOError, for
    torch.distributed's DistError family (a store, the network, a backend)
    and for a RuntimeError in which gloo or NCCL reports a lost peer or a
    deadline. False for everything else: bad input
    (baton.InvalidArgument, NotFound, CorruptCheckpointError), a Python
    error in the program: a new run would fail the same way.
    """
    if isinstance(error, (_baton.Unavailable, _baton.TimeoutError, _baton.Aborted, _baton.IOError)):
        return True
    if isinstance(error, _baton.Error):
        return False
    dist = _torch_distributed()
    if dist is not None and isinstance(error, getattr(dist, "DistError", ())):
        return True
    if type(error) is RuntimeError:
        text = str(error).lower()
        return any(t in text for t in _LOST_PEER_TEXT)
    return False


def exit_for(error, program):
    """Ends the process for ``error`` as a training program should; never returns.

    Call it from ``except Exception as e:`` around the program's main. A lost
    peer, a deadline, I/O (``requeue_cures``): records the failure in the
    event log and exits 75, to be launched again. A bug or bad input: raises
    ``error`` again, for baton's excepthook (python/baton/excepthook.py): the
    traceback, an "uncaught ..." failure record (the job script reads it:
    srun reports the peers' status, not this rank's 1) and MPI_Abort(1), so
    that the peers waiting in a collective end at once.
    """
    import sys
    if not requeue_cures(error):
        raise error
    first = str(error).splitlines()[0] if str(error) else ""
    what = f"{type(error).__name__}: {first}"
    _baton.Runtime.record_failure(what)
    print(f"{program}: {what}; exiting {_baton.EXIT_REQUEUE} to be relaunched or requeued", file=sys.stderr,
          flush=True)
    sys.exit(_baton.EXIT_REQUEUE)


def _torch_distributed():
    """torch.distributed if the program imported torch (never imported here for the question)."""
    import sys
    if "torch" not in sys.modules:
        return None
    import torch.distributed
    return torch.distributed
