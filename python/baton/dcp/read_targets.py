"""Where the rows of a BatonReader load go: DCP's own targets where they can take them, scratch where not.

BatonReader restores with verify_before_write (every rank reads and
verifies every chunk it will read, the ranks agree, and only then is each
chunk read again through the extension's reused chunk buffer, verified
again and copied into the registered memory): no byte that failed
verification is written anywhere, and a version that fails on any rank
leaves the registered memory as it was. So DCP's targets themselves
(planner.resolve_tensor) are registered wherever a target is exactly what
the extension writes, and the load needs no state-sized scratch copy and
no copy after the read (issue 48; the peak memory of a load was the
state's size). A target is registered when, on this rank:

- it is the only ReadItem of its stored chunk (the extension takes one
  registration per array);
- it is whole rows of dim 0 of the stored chunk (no offset in, and the
  full extent of, every inner dim): the extension registers rows;
- it is one contiguous block of host memory (the extension reads into a
  pointer: a piece of inner dims, a transposed or CUDA tensor is not);
- its dtype is the stored chunk's (the extension writes bytes; DCP's
  copy_ would convert). Complex and float8 targets are registered through
  stored_form's views of the same memory: no copy either.

That is the common case: DDP, FSDP2 at the world size that saved, and most
reshards along dim 0. Every other piece is read into scratch memory (the
rows of its chunk that this rank needs) and copied into its target after
the restore returned, i.e. after every byte verified. So are all the
pieces of a version of before the one format (2026-12-06) whose plan holds
bytes entries: those are unpickled after the read and may refuse the load,
which must then leave the targets as they were (``allow_direct``).
"""
import math

import torch
from torch.distributed.checkpoint.planner import LoadItemType

from baton import _baton
from baton.dcp import stored_form
from baton.dtensor_chunks import row_span, stored_piece


class Reads:
    """This rank's side of one load: per stored array, the tensor registered for it and its first row.

    ``registered``: {array name: (tensor, first row)}, a target itself or a
    scratch buffer (arrays not named: registered with no rows).
    ``direct``: [(ReadItem, target)] read straight into the target.
    ``copies``: [(ReadItem, target, array name)] read into scratch, copied
    in by ``copy_in`` once the restore verified them.
    ``byte_items``: {array name: [ReadItem]} of bytes entries (read into
    scratch: their bytes are unpickled, never a target's).
    ``scratch_bytes``: the bytes of scratch memory made (0: every tensor
    target was registered itself).
    """

    __slots__ = ("registered", "direct", "copies", "byte_items", "scratch_bytes")

    def __init__(self):
        self.registered, self.direct, self.copies, self.byte_items, self.scratch_bytes = {}, [], [], {}, 0

    def copy_in(self, planner):
        """The scratch pieces into their targets, and every target committed (after the restore verified all)."""
        if self.direct:
            with torch.no_grad():  # written by the extension: the autograd version counter moves as copy_ moves it
                for _, target in self.direct:
                    torch.autograd.graph.increment_version(target)
        for item, target, name in self.copies:
            buf, first = self.registered[name]
            target.copy_(stored_piece(buf, first, item))
        for item, target in self.direct:
            planner.commit_tensor(item, target)
        for item, target, _ in self.copies:
            planner.commit_tensor(item, target)


def plan(wanted, arrays, chunk_sizes, planner, path, allow_direct):
    """The Reads of a load (before the restore: everything here that can refuse refuses before a byte moves).

    ``wanted``: {array name: [ReadItem]} of this rank's plan; ``arrays``:
    {name: (stored shape, torch dtype)} of the version pinned;
    ``chunk_sizes``: {(fqn, offsets): (sizes, dtype)} of DCP's Metadata.
    """
    reads = Reads()
    for name, items in wanted.items():
        if name not in arrays:
            raise _baton.CorruptCheckpointError(
                "BatonReader: %s names array %r for %r, which the version does not hold"
                % (path, name, items[0].storage_index.fqn))
        shape = arrays[name][0]
        if items[0].type == LoadItemType.BYTE_IO:
            reads.registered[name] = (_scratch(reads, shape, torch.uint8), 0)
            reads.byte_items[name] = items
            continue
        sizes, dtype = chunk_sizes[(items[0].storage_index.fqn, tuple(items[0].storage_index.offset))]
        logical = tuple(sizes) or (1,)
        if shape != stored_form.stored_shape(logical, dtype) and not (shape == () and sizes == ()):
            raise _baton.CorruptCheckpointError(
                "BatonReader: array %r has shape %s, its DCP chunk %s (%s)" % (name, shape, tuple(sizes), dtype))
        targets = []
        for item in items:
            target = planner.resolve_tensor(item).detach()
            if tuple(target.size()) != tuple(int(n) for n in item.lengths):
                raise _baton.InvalidArgument(
                    "BatonReader: %r: the target piece has shape %s, the stored piece %s"
                    % (item.dest_index.fqn, tuple(target.size()), tuple(int(n) for n in item.lengths)))
            targets.append(target)
        if allow_direct and len(items) == 1 and _takes_rows(targets[0], items[0], sizes, dtype):
            item, target = items[0], targets[0]
            first = int(item.storage_offsets[0]) if sizes else 0
            # A 0-d chunk is stored as one row (shape (1,)), unless a Checkpointer saved it replicated (shape ()).
            reads.registered[name] = (target.reshape((1,)) if not sizes and shape != () else target, first)
            reads.direct.append((item, target))
            continue
        first, end = row_span(items) if sizes else (0, 1)
        reads.registered[name] = (_scratch(reads, (end - first,) + logical[1:], dtype), first)
        reads.copies += [(item, target, name) for item, target in zip(items, targets)]
    return reads


def _takes_rows(target, item, sizes, dtype):
    """Whether ``target`` is itself the memory the extension writes for ``item``'s rows (the module's list)."""
    if target.device.type != "cpu" or target.dtype != dtype or not target.is_contiguous():
        return False
    if not sizes:
        return target.dim() == 0
    return (all(int(o) == 0 for o in item.storage_offsets[1:])
            and tuple(int(n) for n in item.lengths[1:]) == tuple(int(n) for n in sizes[1:]))


def _scratch(reads, shape, dtype):
    buf = torch.empty(shape, dtype=dtype, device="cpu")
    reads.scratch_bytes += math.prod(shape) * buf.element_size()
    return buf
