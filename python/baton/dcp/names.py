"""Baton array names for the pieces of a DCP checkpoint.

A DCP WriteItem is one chunk of one state-dict entry (its fully qualified
name and, for a tensor, the chunk's offset). Each becomes one baton array;
its name must be a valid HDF5 dataset name for baton (1-255 bytes, no '/',
not beginning with '.'), so the fqn is escaped and a long one is cut and
completed by a hash. The names are kept in the checkpoint's DCP Metadata
(storage_data), so a reader never recomputes them.
"""
import hashlib

# The pickled DCP Metadata of the version: an array of its own (verified and
# committed with the data). No chunk name lacks '@', so none can be this.
METADATA = "dcp-metadata"
_MAX = 255


def _escape(fqn):
    text = fqn.replace("%", "%25").replace("/", "%2F")
    return "%2E" + text[1:] if text.startswith(".") else text


def chunk_name(fqn, offsets):
    """The array of one chunk: 'fqn@o0,o1' for a tensor, 'fqn@b' for bytes (offsets None)."""
    suffix = "@b" if offsets is None else "@" + ",".join(str(int(o)) for o in offsets)
    name = _escape(fqn) + suffix
    if len(name.encode()) <= _MAX:
        return name
    digest = "#" + hashlib.sha256(name.encode()).hexdigest()[:16]
    keep = _MAX - len(digest.encode()) - len(suffix.encode())
    head = _escape(fqn).encode()[:keep].decode("utf-8", "ignore")
    return head + digest + suffix
