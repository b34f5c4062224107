"""DCP's own reader and planner, made to run no code from the checkpoint they read.

``FileSystemReader`` reads a DCP directory (FileSystemWriter's: `baton ckpt
import`'s source) as DCP's does, but its ``.metadata`` through
baton.dcp.safe_unpickle. ``EmptyStateDictLoadPlanner`` is DCP's planner that
builds the state dict from the checkpoint's own Metadata (what import and
export load through), but hands DCP's ``torch.load(weights_only=False)``
of a bytes entry only what ``torch.load(weights_only=True)`` read. A
refusal is a baton.InvalidArgument naming the file or the entry.
"""
import os

from torch.distributed.checkpoint import FileSystemReader as _FileSystemReader
from torch.distributed.checkpoint.default_planner import _EmptyStateDictLoadPlanner
from torch.distributed.checkpoint.metadata import StorageMeta

from baton.dcp import safe_unpickle


class FileSystemReader(_FileSystemReader):
    def read_metadata(self, *args, **kwargs):
        rank = kwargs.get("rank")
        path = os.path.join(str(self.path), ".metadata" if rank is None else "__%d.metadata" % rank)
        with open(path, "rb") as f:
            md = safe_unpickle.metadata(f.read(), path)
        if getattr(md, "storage_meta", None) is None:
            md.storage_meta = StorageMeta()
        md.storage_meta.load_id = self.load_id
        return md


class EmptyStateDictLoadPlanner(_EmptyStateDictLoadPlanner):
    def __init__(self, source, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._source = source

    def load_bytes(self, read_item, value):
        what = "%s: the bytes entry %r" % (self._source, read_item.dest_index.fqn)
        super().load_bytes(read_item, safe_unpickle.resaved(value, what))
