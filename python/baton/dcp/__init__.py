"""baton as a torch.distributed.checkpoint storage backend.

    import torch.distributed.checkpoint as dcp
    from baton.dcp import BatonWriter, BatonReader

    dcp.save(state_dict, storage_writer=BatonWriter("/shared/ckpt"))        # or dcp.async_save
    dcp.load(state_dict, storage_reader=BatonReader("/shared/ckpt"))

DCP plans, baton stores: HDF5 shards with a hash per chunk, the manifest
committed by rename, versions and retention, fallback to an older version
when one fails to verify, level 2 on request. `baton ckpt ls|verify|inspect`
read what BatonWriter wrote. Conversions (baton.dcp.convert, `baton ckpt
import|export` and `python -m baton.dcp import|export`): a DCP directory or a torch.save file
into a baton version, and a baton version out to DCP's FileSystemWriter
format or a torch.save file.
"""
__all__ = ["BatonReader", "BatonWriter"]


def __getattr__(name):
    # Imported on first use (PEP 562), so that `python -m baton.dcp` (what
    # `baton ckpt import|export` runs) can check its input and say that
    # torch is missing before anything imports torch.
    if name == "BatonReader":
        from baton.dcp.reader import BatonReader

        return BatonReader
    if name == "BatonWriter":
        from baton.dcp.writer import BatonWriter

        return BatonWriter
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
