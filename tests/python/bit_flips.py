"""Damage for the restore tests: one bit flipped inside a known byte pattern of a version's HDF5 shard files.

The pattern (a tensor's bytes, as saved) finds the data without reading baton's own indexes, so a test
damages what a reader must verify, wherever the writer put it.
"""
import os


def flip_a_bit_of(directory, suffix, pattern):
    """Flips one bit inside the first copy of ``pattern`` in the .h5 files of version ``*-s<suffix>``."""
    return flip_a_bit_in(directory, next(e for e in os.listdir(directory) if e.endswith(f"-s{suffix}")), pattern)


def flip_a_bit_in(directory, version, pattern):
    """Flips one bit inside the first copy of ``pattern`` in the .h5 files of ``version``; returns the file."""
    for root, _, files in os.walk(os.path.join(directory, version)):
        for name in sorted(files):
            path = os.path.join(root, name)
            data = open(path, "rb").read()
            at = data.find(pattern)
            if name.endswith(".h5") and at >= 0:
                with open(path, "r+b") as f:
                    f.seek(at + 3)
                    f.write(bytes([data[at + 3] ^ 0x04]))
                return path
    raise AssertionError(f"no .h5 file of {version} holds the pattern")
