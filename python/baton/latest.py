"""baton.latest(dir): "is there a checkpoint yet, and of which step", without an exception.

    step = baton.latest("/shared/ckpt")   # None: no committed version (or no directory)

Every writer (baton.Checkpointer, BatonWriter, baton.lightning, `baton
ckpt import`) commits a version the same way: a directory v<seq>-s<step>
whose manifest.json is renamed into place last (docs/checkpoint-format.md),
so the newest committed version is the complete one of the highest seq.
Answered from the listing alone: nothing is created, locked or written,
no MPI is needed, and no manifest is read or verified (a restore still
verifies, and may fall back to an older version; a version quarantined
after failed restores is still counted here).
"""
import os
import re

_VERSION = re.compile(r"^v(\d{8,})-s(0|[1-9]\d*)$")  # only the canonical spelling (catalog's ParseVersionName)


def latest(dir):
    """The step of ``dir``'s newest committed version, or None (no such version, no such directory)."""
    try:
        names = os.listdir(dir)
    except (FileNotFoundError, NotADirectoryError):
        return None
    best = None
    for name in names:
        m = _VERSION.match(name)
        if m is None:
            continue
        manifest = os.path.join(dir, name, "manifest.json")
        try:
            if not os.path.isfile(manifest) or os.path.islink(manifest) or os.path.islink(os.path.join(dir, name)):
                continue
        except OSError:
            continue
        seq, step = int(m.group(1)), int(m.group(2))
        if best is None or seq > best[0]:
            best = (seq, step)
    return None if best is None else best[1]
