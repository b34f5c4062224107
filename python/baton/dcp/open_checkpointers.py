"""The checkpointers BatonWriter keeps open: one per directory per process.

Before, each BatonWriter save opened a whole baton.ArrayCheckpointer (the
directory's lock, communicator duplicates, their collectives) and closed
it again; under dcp.async_save it did so on DCP's background thread, where
those collectives (and the gather of the state's values) ran on the
Runtime's world communicator beside the program's own collectives on it
(issue 46 item 11, issue 48 item 4). Here:

- one checkpointer per directory stays open across saves, for every
  BatonWriter of the process on that directory (a program often makes a
  writer per save), until BatonWriter.close(), another opener of the
  directory in this process (a BatonReader, a baton.Checkpointer, an
  ArrayCheckpointer: the extension asks yield_directory first), the
  Runtime's close or the interpreter's exit (the extension closes it with
  its Runtime, before MPI_Finalize);
- it is opened and closed on the program's thread only: the caller of
  dcp.save, or of dcp.async_save (in BatonWriter.stage(), which DCP calls
  there); DCP's background thread only uses it, and the checkpointer's
  collectives run on its own duplicated communicators, never on the
  Runtime's world (MPI_THREAD_MULTIPLE, which baton's Runtime requires,
  makes two threads on two communicators legal);
- a directory has at most one save in flight: a save (sync, or the
  staging of an async one) first waits, on the program's thread, until the
  save before it on that directory has ended (see InFlight); not for a save
  whose dcp.async_save raised before DCP's executor held it (it never runs).

The staged copy of a dcp.async_save (staging.py) is kept once per
process, for the next async save into any directory: across a close of a
directory's checkpointer by another opener (a BatonReader's load between
two saves), until BatonWriter.close() or the interpreter's exit; a
staging uses it only once the save that read it is done (InFlight.done).

Threading: the table is guarded by one lock; an entry's checkpointer is
used by one thread at a time (Entry.lock).
"""
import os
import threading
import time

from baton import _baton, storage
from baton.dcp import staging

_table_lock = threading.Lock()
_open = {}  # directory key -> Entry
_staging = staging.StagingBuffers()  # the process's: the last async save's staged copy, kept for the next


def directory_key(path):
    """The directory `path` names (None: $BATON_CKPT_DIR), absolute with links resolved, so two spellings meet."""
    if path is None:
        path = os.environ.get("BATON_CKPT_DIR") or None
    if path is None:
        raise _baton.InvalidArgument("BatonWriter: no checkpoint directory: give BatonWriter(path) (or "
                                     "dcp.save's checkpoint_id), or set BATON_CKPT_DIR")
    return os.path.realpath(os.fspath(path))


class InFlight:
    """One dcp.async_save on a directory, from its staging to the end of DCP's background save.

    The save has ended when the thread DCP runs it on has ended: DCP (2.5
    and 2.15 alike) runs each async_save on a one-worker executor that it
    shuts down when the save's future completes, so the thread's end comes
    after DCP's last collective of that save (the gather of the write
    results), not only after baton's commit. Waiting for it, and not only
    for write_data, keeps the next save's DCP collectives from meeting this
    one's on the same process group in another order on another rank.
    """

    def __init__(self, entry, step_hint):
        self.entry = entry
        self.step_hint = step_hint  # for messages: the step the writer was asked for, or None
        self.staged_by = threading.current_thread()
        self.thread = None
        self.began = threading.Event()
        self.handed_over = threading.Event()  # DCP's executor holds the save (handed())

    def handed(self):
        """Called on the staging thread once DCP's executor holds the save (BatonWriter.synchronize_staging,
        which dcp.async_save calls after submitting it, before it returns)."""
        self.handed_over.set()

    def begin(self):
        """Called on DCP's thread when its save begins (BatonWriter.reset, DCP's first call of the writer
        there, and again in set_up_storage_writer): from here the save has ended when that thread has."""
        self.thread = threading.current_thread()
        self.began.set()

    def never_runs(self):
        """Whether the dcp.async_save that staged this save raised before DCP's executor held it (asked on
        the staging thread, which has left that call): then no thread will ever run the save."""
        return threading.current_thread() is self.staged_by and not self.handed_over.is_set() and \
            not self.began.is_set()

    def done(self, grace=0.5):
        """Whether the save reads its staged copy no more (staging.StagingBuffers asks before it writes the
        copy again): its thread began and ended; or its dcp.async_save raised before DCP's executor held it
        (never_runs, asked on the staging thread) and no thread began it within ``grace`` seconds, which an
        interrupt between DCP's submit and its hand-over would have started at once. Asked on another
        thread, a save not yet begun is not done."""
        if not self.began.is_set() and not (self.never_runs() and not self.began.wait(grace)):
            return False
        return not self.began.is_set() or not self.thread.is_alive()

    def wait(self, timeout, what):
        """Waits until the save ended; baton.TimeoutError naming it past `timeout` seconds."""
        if self.never_runs():
            # Before, this waited `timeout` (collective_timeout, 600 s by default) for a save no thread would
            # begin, then raised. Nothing of it was written: the save has ended.
            return
        deadline = time.monotonic() + timeout
        if self.began.wait(timeout):
            while self.thread.is_alive() and time.monotonic() < deadline:
                self.thread.join(min(1.0, max(deadline - time.monotonic(), 0.0)))
            if not self.thread.is_alive():
                return
        raise _baton.TimeoutError(
            "%s: the dcp.async_save before it on %s (step %s) had not ended after %.0f s (%s): a directory has "
            "one save in flight; wait for that save's future (future.result()) before the next save"
            % (what, self.entry.key, "chosen at its save" if self.step_hint is None else self.step_hint, timeout,
               "DCP's thread never began it" if not self.began.is_set() else "still running on " + self.thread.name))


class Entry:
    """A directory's open checkpointer, the options and Runtime it was opened with, and its save in flight."""

    def __init__(self, key):
        self.key = key
        self.ck = None
        self.runtime = None
        self.options = None
        self.in_flight = None  # InFlight of the newest async save, until a later save waited for it
        self.newest_step = None  # the newest step saved through this checkpointer (None: read it from the directory)
        self.lock = threading.Lock()  # one thread uses ck at a time (the extension refuses a second at once)

    def open(self):
        return self.ck is not None and not self.ck.closed

    def wait_for_save_in_flight(self, what):
        f = self.in_flight
        if f is not None and f.thread is not threading.current_thread():
            f.wait(_timeout(self.runtime), what)
        self.in_flight = None

    def close(self):
        ck, self.ck, self.newest_step = self.ck, None, None
        if ck is not None and not ck.closed:
            ck.close()


def _timeout(runtime):
    try:
        return float(runtime.collective_timeout)
    except Exception:  # a closed Runtime: the save on it ended with it
        return 1.0


def open_for_save(path, runtime, options, what):
    """The directory's open checkpointer for a save on the program's thread (opened, or reopened for other
    options or another Runtime, here); first waits for the directory's save in flight to end."""
    key = directory_key(path)
    with _table_lock:
        entry = _open.setdefault(key, Entry(key))
    entry.wait_for_save_in_flight(what)
    with entry.lock:
        if entry.open() and (entry.runtime is not runtime or entry.options != options):
            entry.close()
        if not entry.open():
            entry.ck = None
            entry.ck = storage.open_for_writing(runtime, dir=key, **options)
            entry.runtime, entry.options, entry.newest_step = runtime, dict(options), None
    return entry


def yield_directory(key):
    """Closes this process's writer checkpointer on directory `key` (after its save in flight) so that another
    opener gets the directory; whether one was open. The extension calls it (ArrayCheckpointer's constructor)
    when the directory is held."""
    with _table_lock:
        entry = _open.get(directory_key(key))
    if entry is None or not entry.open():
        return False  # not ours (ours is closed while open_for_save opens it: the holder is another checkpointer)
    release(entry.key, "opening another checkpointer on %s" % entry.key)
    return True


def staging():
    """The process's staged-copy buffers (staging.StagingBuffers), for BatonWriter.stage."""
    return _staging


def release(path, what, drop_staging=False):
    """Closes the directory's checkpointer, if this process keeps one (on the program's thread), after its save
    in flight ended: BatonWriter.close() (which also drops the staged copy kept for the next async save:
    ``drop_staging``), and another opener of the directory (yield_directory)."""
    try:
        key = directory_key(path)
    except _baton.InvalidArgument:
        return
    with _table_lock:
        entry = _open.get(key)
    if drop_staging:
        _staging.clear()  # a save still reading the copy holds its own references to it
    if entry is None:
        return
    entry.wait_for_save_in_flight(what)
    with entry.lock:
        entry.close()
    with _table_lock:
        if _open.get(key) is entry and not entry.open():
            del _open[key]
