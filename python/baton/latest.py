"""baton.latest(dir): "is there a checkpoint yet, and of which step", without an exception.

    step = baton.latest("/shared/ckpt")   # None: no committed version (or no directory)

Every writer (baton.Checkpointer, BatonWriter, baton.lightning, `baton
ckpt import`) commits a version the same way: a directory v<seq>-s<step>
whose manifest.json is renamed into place last (docs/checkpoint-format.md),
so the newest committed version is the complete one of the highest seq.
Answered from the extension's listing (the one a restore starts from, and
its one rule for version names) alone: nothing is created, locked or written,
no MPI is needed, and no manifest is read or verified (a restore still
verifies, and may fall back to an older version; a version quarantined
after failed restores is still counted here).
"""
from baton import _baton, storage


def latest(dir):
    """The step of ``dir``'s newest committed version, or None (no such version, no such directory)."""
    try:
        versions = storage.committed_versions(str(dir))
    except _baton.InvalidArgument:  # not a directory
        return None
    return versions[-1][1] if versions else None
