"""baton.storage: a checkpoint directory as the front ends see it; the one caller of the extension's storage.

    s = storage.open_for_writing(runtime, dir="/shared/ckpt", keep=3)   # the directory's writer lock
    s = storage.open_read_only(runtime, dir="/shared/ckpt")             # creates and writes nothing
    s.register_replicated(name, buffer) / s.register_sharded(...)       # a plan's buffers, by array name
    s.save(step) / s.save_async(step)                                   # write a version (collective)
    s.read_metadata(step, version=, older_than=, as_restore=)           # what a version holds (collective)
    s.restore(step, arrays=, version=, older_than=)                     # read planned arrays (collective)
    s.close()
    storage.committed_versions(dir)                                     # [(name, step)], no MPI
    storage.foreign_entries(dir)                                        # what baton did not write there

As DCP's planners reach their files only through a StorageWriter or
StorageReader, every front end (baton.Checkpointer, baton.dcp's BatonWriter
and BatonReader, baton.lightning, baton.latest) reaches a checkpoint
directory only through this module: it alone makes the extension's
checkpointer (baton._baton.ArrayCheckpointer) and calls its listing
(_committed_versions); tests/python/storage_module.py fails if another
module of the package does. What the files hold, how a version is verified
and committed, and the fallback to an older version are the extension's
(ckpt/); what a state dict becomes (the plan, the tree, the matching) is
the front ends'. The error classes, the Runtime and EXIT_REQUEUE are not
storage: the front ends take them from baton._baton themselves.

A Storage has the extension's method names and meanings, so that a call
site reads as it did (this module was a move of the calls, 2026-12-06);
the extension's docstrings (help(baton.ArrayCheckpointer)) are the full
word on each. Threading: one thread at a time calls a Storage (the
extension refuses a second at once, baton.Unavailable).
"""
import os
import re

from baton import _baton


def open_for_writing(runtime, dir=None, **options):
    """The directory opened to save into and restore from (collective; takes its writer lock).

    ``dir``: the shared directory (None: $BATON_CKPT_DIR); ``options``:
    baton.ArrayCheckpointer's (keep, level2, local_dir, verify_replicas, ...).
    """
    return Storage(_baton.ArrayCheckpointer(runtime, dir=dir, **options))


def open_read_only(runtime, dir=None, **options):
    """The directory opened to read (collective): read_only_options(options), so nothing is created or written."""
    return Storage(_baton.ArrayCheckpointer(runtime, dir=dir, **read_only_options(options)))


def read_only_options(options):
    """The extension's options for a reader's open of ``options``.

    A reader creates nothing and writes nothing where it reads (no lock,
    run file, event log of its own; a missing directory is baton.NotFound,
    not created): read_only=True, unless the reader reads node-local
    copies (level2 or local_dir: level 2 keeps its own records) or says
    read_only itself. Its restore record waits in the process's event log
    for the program's writer to open the log (docs/events.md).
    """
    out = dict(options)
    if not (out.get("level2") or out.get("local_dir")):
        out.setdefault("read_only", True)
    return out


def committed_versions(dir):
    """[(name, step)] of ``dir``'s committed versions, oldest first; [] when ``dir`` does not exist or is no
    directory.

    The listing and version-name rule a restore starts from. No MPI;
    nothing created, locked, read or verified.
    """
    return _baton._committed_versions(os.fspath(dir))


def version_name(path):
    """A version's name ("v00000012-s400") from its path at either level, what restore(version=) pins."""
    return os.path.basename(str(path).rstrip("/"))


class Storage:
    """An open checkpoint directory: registered buffers, versions written and read (open_for_writing,
    open_read_only). Every call but the getters, register_*, unregister and async_status is collective."""

    __slots__ = ("_array_ck",)

    def __init__(self, array_checkpointer):
        self._array_ck = array_checkpointer

    # --- a plan's buffers -----------------------------------------------------------------------------
    def register_replicated(self, name, array, dtype=None):
        """Registers ``array`` (the same on every rank) as array ``name``; again: replaces it."""
        return self._array_ck.register_replicated(name, array, dtype=dtype)

    def register_sharded(self, name, array, offset, global_shape=None, dtype=None):
        """Registers ``array`` as rows [offset, offset + len(array)) of array ``name`` of ``global_shape``."""
        return self._array_ck.register_sharded(name, array, offset=offset, global_shape=global_shape, dtype=dtype)

    def unregister(self, name):
        """Drops array ``name``'s registration (baton.NotFound when none)."""
        return self._array_ck.unregister(name)

    @property
    def registered(self):
        """The registered names, sorted."""
        return self._array_ck.registered

    @property
    def user_blob(self):
        """Job-wide bytes saved with the next save, given back by a restore (<= 64 MiB)."""
        return self._array_ck.user_blob

    @user_blob.setter
    def user_blob(self, value):
        self._array_ck.user_blob = value

    @property
    def rank_state(self):
        """This rank's own bytes saved with the next save, given back at the same world size (<= 64 MiB)."""
        return self._array_ck.rank_state

    @rank_state.setter
    def rank_state(self, value):
        self._array_ck.rank_state = value

    # --- writing a version ----------------------------------------------------------------------------
    def save(self, step):
        """Writes the registered arrays and blobs as version ``step`` and commits it."""
        return self._array_ck.save(step)

    def save_async(self, step):
        """As save, written in the background; the next collective call commits it."""
        return self._array_ck.save_async(step)

    def wait(self, timeout=None):
        """Commits the save in flight, if any (baton.TimeoutError past ``timeout`` seconds)."""
        return self._array_ck.wait(timeout)

    def wait_or_abandon(self, timeout):
        """As wait, but a save not written within ``timeout`` seconds is abandoned (baton.Aborted)."""
        return self._array_ck.wait_or_abandon(timeout)

    def async_status(self):
        """This rank's save in flight: "idle", "writing", "written" or "failed" (local)."""
        return self._array_ck.async_status()

    # --- reading a version ----------------------------------------------------------------------------
    def read_metadata(self, step=None, **pinned):
        """What the version restore(step, **pinned) would try first holds (dict, its user blob included), or None.

        ``pinned``: version= (that version only) or older_than= (only
        versions committed before that one), by version_name; from_level=;
        as_restore=True: found as restore() finds it (damaged manifests
        passed over are counted, listed under "skipped"; none left after
        failures is restore()'s baton.NotFound), for a front end that plans
        on it and then restores that version pinned.
        """
        return self._array_ck.read_metadata(step, **pinned)

    def restore(self, step=None, arrays=None, **options):
        """Reads the registered ``arrays`` (None: all) of the newest version that verifies; its step, or None.

        ``options``: version= (that version, no fallback), older_than=,
        from_level=, drop_rank_state_on_resize=, verify_before_write= (every rank verifies all
        before any array is written: a version that fails leaves them untouched); see the
        extension's restore.
        """
        return self._array_ck.restore(step=step, arrays=arrays, **options)

    def last_restore(self):
        """What the last restore did (step, version_path, level, fallbacks, ...), or None before one."""
        return self._array_ck.last_restore()

    def last_stats(self):
        """The last save's or restore's figures on this rank (bytes, bytes_read, seconds, phases, ...)."""
        return self._array_ck.last_stats()

    # --- the directory's own collectives ---------------------------------------------------------------
    def allgather_bytes(self, data, what):
        """Every rank's ``data`` in rank order, over the directory's own communicator (not the Runtime's world:
        safe on a thread other than the program's, as DCP's async thread)."""
        return self._array_ck._allgather_bytes(data, what)

    # --- the directory --------------------------------------------------------------------------------
    @property
    def dir(self):
        """The checkpoint directory."""
        return self._array_ck.dir

    @property
    def run_id(self):
        """The directory's run id, the same on every rank."""
        return self._array_ck.run_id

    @property
    def closed(self):
        """Whether close() was called (or the Runtime's close closed it)."""
        return self._array_ck.closed

    def close(self):
        """Commits a save in flight (collective then) and releases the directory; twice is harmless."""
        return self._array_ck.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        # While an exception unwinds the other ranks are not closing: the extension abandons the save in flight.
        return self._array_ck.__exit__(*exc)


# What baton itself writes at a checkpoint directory's top: versions
# ("v00000012-s400"), the run file and the writer's lock, the event logs,
# and the durable writes' temporaries of these (NAME.tmp.XXXXXX, left by a
# crash): ckpt/catalog.h, ckpt/run.h, ckpt/fs/durable_write.cc.
# \.removing-: a version retention renamed away and removes off the saving thread (ckpt/version_removal.h).
_OWN = re.compile(r"(v[0-9]+-s[0-9]+|run|writer\.lock|events|\.removing-v[0-9]+-s[0-9]+)(\.tmp\..*)?\Z", re.S)


def foreign_entries(dir):
    """The names at the top of ``dir`` that baton did not write, sorted; [] when ``dir`` is missing.

    Empty directories do not count (a tool that makes its directory
    before it writes, as Lightning's ModelCheckpoint does, holds nothing
    yet). A restore that finds no version in a directory holding any of
    these is not a first run: the program was pointed at somebody else's
    files (issue 46 item 6). No MPI; reads nothing but the listing.
    """
    try:
        entries = list(os.scandir(os.fspath(dir)))
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for e in entries:
        if _OWN.match(e.name):
            continue
        try:
            if e.is_dir(follow_symlinks=False) and not any(os.scandir(e.path)):
                continue
        except OSError:
            pass  # unreadable: it holds something we cannot see, so it counts
        out.append(e.name)
    return sorted(out)
