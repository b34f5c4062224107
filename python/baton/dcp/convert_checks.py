"""What `import` and `export` refuse before they write a byte.

Bad input (a source that is neither a DCP directory nor a file, a target
that exists, a DIR that holds something other than a baton checkpoint)
raises baton.InvalidArgument or baton.NotFound naming the path, so that
`baton ckpt import|export` (and `python -m baton.dcp`) exit 2 with
nothing written. No torch here: the checks answer before torch is
imported, which takes seconds.
"""
import fcntl
import os

from baton import _baton

# The file a FileSystemWriter checkpoint directory is recognised by.
DCP_METADATA = ".metadata"
# The file every baton checkpoint directory holds from its first version on (ckpt/run.h).
BATON_RUN_FILE = "run"


def _is_baton_dir(path):
    return os.path.isfile(os.path.join(path, BATON_RUN_FILE))


def check_no_live_writer(directory, what):
    """Unavailable at once when a live writer holds DIR's writer.lock where flock reaches (this node, or every node
    of a cluster file system): import's Checkpointer would wait 120 s for it, silently, and export (a read-only
    reader, no lock) would read beside a live job. A probe only: for import, the Checkpointer's own lock
    (ckpt/writer_lock.cc) still decides."""
    path = os.path.join(directory, "writer.lock")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return  # none yet, or not readable: the Checkpointer says what it finds
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 512).decode("utf-8", "replace").strip() or "a writer"
            raise _baton.Unavailable("%s: %s is held by %s: a live writer uses %s; %s when it has ended"
                                     % (what, path, holder, directory, what)) from None
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def check_import(source, directory):
    """SOURCE is a DCP directory or a regular file; DIR is new, empty or a baton checkpoint directory."""
    if not os.path.lexists(source):
        raise _baton.NotFound("import: %s: no such file or directory" % source)
    if os.path.isdir(source):
        if not os.path.isfile(os.path.join(source, DCP_METADATA)):
            hint = (" (it is a baton checkpoint directory: `export` writes one out)" if _is_baton_dir(source) else "")
            raise _baton.InvalidArgument(
                "import: %s is a directory without %s: not a DCP checkpoint (FileSystemWriter's)%s"
                % (source, DCP_METADATA, hint))
    elif not os.path.isfile(source):
        raise _baton.InvalidArgument("import: %s is neither a directory nor a regular file" % source)
    if os.path.lexists(directory):
        if not os.path.isdir(directory):
            raise _baton.InvalidArgument("import: %s exists and is not a directory" % directory)
        if os.listdir(directory) and not _is_baton_dir(directory):
            raise _baton.InvalidArgument(
                "import: %s holds files but no baton checkpoint (no %r file): refusing to write a version into "
                "it; give a new or empty directory" % (directory, BATON_RUN_FILE))
        check_no_live_writer(directory, "import")


def check_export(directory, target, fmt, force):
    """DIR is a baton checkpoint directory; TARGET's parent exists; TARGET is absent, an empty directory (dcp), or replaced with --force
    only when it is what an export writes (a DCP directory, a file)."""
    if fmt not in ("dcp", "torch"):
        raise _baton.InvalidArgument("export: format %r is neither 'dcp' nor 'torch'" % (fmt,))
    if not os.path.isdir(directory):
        raise _baton.NotFound("export: %s: no such directory" % directory)
    # Checked here, before the reader: a directory that is no baton one is named as such, not as "no version".
    if not _is_baton_dir(directory):
        raise _baton.NotFound("export: %s holds no baton checkpoint (no %r file)" % (directory, BATON_RUN_FILE))
    check_no_live_writer(directory, "export")
    parent = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(parent):
        raise _baton.NotFound("export: %s: no such directory (the parent of %s)" % (parent, target))
    if not os.path.lexists(target):
        return
    if fmt == "dcp" and os.path.isdir(target) and not os.path.islink(target) and not os.listdir(target):
        return
    if not force:
        raise _baton.InvalidArgument("export: %s exists: refusing to overwrite it (--force replaces it)" % target)
    if fmt == "torch" and not (os.path.isfile(target) and not os.path.islink(target)):
        raise _baton.InvalidArgument("export: %s exists and is not a regular file: --force replaces only a file "
                                     "with a torch.save file" % target)
    if fmt == "dcp" and not (os.path.isdir(target) and not os.path.islink(target)
                             and os.path.isfile(os.path.join(target, DCP_METADATA))):
        raise _baton.InvalidArgument("export: %s exists and is not a DCP checkpoint directory (no %s): --force "
                                     "replaces only a DCP checkpoint" % (target, DCP_METADATA))
