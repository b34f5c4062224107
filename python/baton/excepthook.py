"""An uncaught exception on any rank ends the whole job at once, with exit 1.

baton.Runtime() installs ``sys.excepthook`` (once per process). Without it
the raising rank would leave its script, wait in MPI_Finalize for ranks that
sit in their next collective, and exit 75 ("requeue me") a minute later:
Slurm would run a deterministic bug again and again. As ``python -m mpi4py``
does, the hook prints the traceback, records the failure in the event log,
and calls MPI_Abort(1), which ends every rank under mpirun and srun.

Where the traceback goes: the process's own stderr (``sys.__stderr__``),
every line prefixed ``[rankN]:`` as torch.distributed's own lines are.
Not ``sys.stderr`` at the time of the call: torch.distributed's
init_process_group wraps ``sys.excepthook`` in one of its own that swaps
``sys.stderr`` for a buffer while it runs the hook before it, and writes that
buffer out only when the hook returns. Ours never returns (MPI_Abort), so
anything written to the swapped stream was lost and the terminal showed only
Open MPI's banner. A program's own hook (installed before the Runtime) still
runs, with its stderr output prefixed and sent to the same place.

Installed once per process however many Runtimes it makes (a second
Runtime, e.g. a storage writer's, only updates the rank and host): wrapping
again, with torch's wrapper in between, made the hook call itself hundreds of
times. A call that re-enters the hook (some wrapper of ours chained below
another of ours) hands the exception to the hook that was there first.

Not for: ``sys.exit(n)`` (SystemExit never reaches the hook: exit 0 and
baton.EXIT_REQUEUE keep their meaning), an interactive session (``python
-i``, the REPL: the traceback is printed and the session goes on), a child
forked after the Runtime (it has its own life: the hook it inherited acts
as the one before it), and exceptions in threads other than the main one
(threading.excepthook: the thread ends, the program goes on).
"""

import io
import os
import sys
import traceback

_hook_state = None  # _State of the process that installed the hook, or None before the first Runtime
_active = False     # the hook is running (a re-entry goes to the hook that was there first)


class _State:
    def __init__(self, rank, host, previous):
        self.pid = os.getpid()
        self.rank = rank
        self.host = host
        self.previous = previous


def install(rank, host):
    """Makes an uncaught exception end the job with exit 1 (baton.Runtime() calls it)."""
    global _hook_state
    if _hook_state is not None:
        # A later Runtime of this process, or the first one of a forked child: the hook is
        # in the chain already (maybe under a wrapper of torch's); only who we are changes.
        _hook_state.pid, _hook_state.rank, _hook_state.host = os.getpid(), rank, host
        return
    _hook_state = _State(rank, host, sys.excepthook)
    sys.excepthook = _hook


def _interactive():
    return bool(sys.flags.interactive) or hasattr(sys, "ps1")


def _stream():
    """The process's own stderr: not a buffer someone swapped in for sys.stderr."""
    return sys.__stderr__ if sys.__stderr__ is not None else sys.stderr


def _text_of(previous, kind, value, tb):
    """What the hook before ours (or Python's default) would print, as text."""
    if previous is sys.__excepthook__:
        return "".join(traceback.format_exception(kind, value, tb))
    saved, buf = sys.stderr, io.StringIO()
    sys.stderr = buf
    try:
        previous(kind, value, tb)
    except BaseException as e:  # noqa: BLE001: a broken hook must not hide the program's exception
        buf.write("".join(traceback.format_exception(kind, value, tb)))
        buf.write("(the program's sys.excepthook failed: %s: %s)\n" % (type(e).__name__, e))
    finally:
        sys.stderr = saved
    return buf.getvalue()


def _hook(kind, value, tb):
    global _active
    state = _hook_state
    if state is None or _active or state.pid != os.getpid() or _interactive():
        (state.previous if state is not None else sys.__excepthook__)(kind, value, tb)
        return
    _active = True
    from baton import _baton  # here, not at import: this module is imported by the extension's Runtime
    try:
        tag = "[rank%d]: " % state.rank
        head = ("baton rank %d on %s: uncaught %s: %s; ending the job with exit 1 (MPI_Abort: every rank ends; "
                "not %d: a requeue would raise it again)\n" % (state.rank, state.host, kind.__name__, value,
                                                                _baton.EXIT_REQUEUE))
        text = head + _text_of(state.previous, kind, value, tb)
        out = _stream()
        # One write: the lines of two ranks interleave by whole blocks, not by fragments.
        out.write("".join(tag + line for line in text.splitlines(True)))
        out.flush()
        _baton.Runtime.record_failure("uncaught %s on rank %d (%s): %s" % (kind.__name__, state.rank, state.host,
                                                                            value), kind="uncaught")
    finally:
        _baton._abort_job(1)
