"""An uncaught exception on any rank ends the whole job at once, with exit 1.

baton.Runtime() installs ``sys.excepthook`` (once per process). Without it
the raising rank would leave its script, wait in MPI_Finalize for ranks that
sit in their next collective, and exit 75 ("requeue me") a minute later:
Slurm would run a deterministic bug again and again. As ``python -m mpi4py``
does, the hook prints the traceback, each line naming the rank and host,
records the failure in the event log, and calls MPI_Abort(1), which ends
every rank under mpirun and srun.

Not for: ``sys.exit(n)`` (SystemExit never reaches the hook: exit 0 and
baton.EXIT_REQUEUE keep their meaning), an interactive session (``python
-i``, the REPL: the traceback is printed and the session goes on), a child
forked after the Runtime (it has its own life: the hook it inherited acts
as the one before it), and exceptions in threads other than the main one
(threading.excepthook: the thread ends, the program goes on).
"""

import os
import sys
import traceback

_hook_state = None  # _State of this process, or None before the first Runtime


class _State:
    def __init__(self, rank, host, previous):
        self.pid = os.getpid()
        self.rank = rank
        self.host = host
        self.previous = previous


def install(rank, host):
    """Makes an uncaught exception end the job with exit 1 (baton.Runtime() calls it)."""
    global _hook_state
    if _hook_state is not None and sys.excepthook is _hook:
        _hook_state.pid, _hook_state.rank, _hook_state.host = os.getpid(), rank, host
        return
    _hook_state = _State(rank, host, sys.excepthook)
    sys.excepthook = _hook


def _interactive():
    return bool(sys.flags.interactive) or hasattr(sys, "ps1")


def _hook(kind, value, tb):
    state = _hook_state
    if state is None or state.pid != os.getpid() or _interactive():
        (state.previous if state is not None else sys.__excepthook__)(kind, value, tb)
        return
    from baton import _baton  # here, not at import: this module is imported by the extension's Runtime
    try:
        prefix = "baton rank %d on %s: " % (state.rank, state.host)
        head = ("%suncaught %s: %s; ending the job with exit 1 (MPI_Abort: every rank ends; not %d: a requeue "
                "would raise it again)\n" % (prefix, kind.__name__, value, _baton.EXIT_REQUEUE))
        if state.previous is sys.__excepthook__:
            lines = "".join(traceback.format_exception(kind, value, tb)).splitlines(True)
            sys.stderr.write(head + "".join(prefix + line for line in lines))
        else:  # the program's own hook prints it its way
            sys.stderr.write(head)
            state.previous(kind, value, tb)
        sys.stderr.flush()
        _baton.Runtime.record_failure("uncaught %s on rank %d (%s): %s" % (kind.__name__, state.rank, state.host,
                                                                            value))
    finally:
        _baton._abort_job(1)
