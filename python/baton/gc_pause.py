"""The cyclic garbage collector paused for one front-end call.

A save or a restore of a state dict makes a few objects per leaf (the
walk's items, the tree's JSON nodes, the match's targets), which they hold
until the call returns: 32,500 for 5,000 leaves. Each 700 allocations the
collector runs over the young objects, every tenth of those runs over the
older ones too, and every tenth of those over every object of the process
(the model, the optimizer, torch's own): 0.045-0.065 s of a
0.075-0.095 s walk of 5,000 leaves here (gc.disable: 0.029 s; cProfile
blamed whichever function allocated when it ran). So the calls run with
the collector paused, as long as the call; reference counting still frees
everything that holds no cycle at once, and a cycle made meanwhile is
collected at the collector's next run after the call.

Paused only where the program left it on; re-enabled only by the call
that paused it, the last of overlapping calls (a save_async's walk on the
program's thread beside a restore on another): a program that disabled it
before the call keeps it so.
"""
import contextlib
import functools
import gc
import threading

_lock = threading.Lock()
_holders = 0  # calls inside paused() that found the collector on (0: none paused it)


@contextlib.contextmanager
def paused():
    """The collector off for the ``with`` block, if it was on."""
    global _holders
    with _lock:
        mine = _holders > 0 or gc.isenabled()
        if mine:
            _holders += 1
            gc.disable()
    try:
        yield
    finally:
        if mine:
            with _lock:
                _holders -= 1
                if _holders == 0:
                    gc.enable()


def pausing(method):
    """``method`` run inside paused()."""
    @functools.wraps(method)
    def run(*args, **kwargs):
        with paused():
            return method(*args, **kwargs)
    return run
