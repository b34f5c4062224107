"""Markers a program puts into its state dict: Sharded and PerRank."""


class Sharded:
    """This rank's rows of an array split along dim 0 over the ranks.

    ``baton.Sharded(tensor, offset, global_shape)``: ``tensor`` holds rows
    ``[offset, offset + tensor.shape[0])`` of an array of ``global_shape``
    (ZeRO-1-style optimizer state, a row-split embedding). Over all ranks
    the row ranges must tile dim 0 exactly (checked at save). The array is
    written once, each rank writing its own rows, and a restore at another
    world size reads each rank's new rows from wherever they were saved
    (resharding). ``tensor`` is a torch.Tensor or a NumPy array;
    ``global_shape`` is the same on every rank. Restore writes into
    ``tensor`` in place.
    """

    __slots__ = ("tensor", "offset", "global_shape")

    def __init__(self, tensor, offset, global_shape):
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"baton.Sharded: offset must be an int >= 0, not {offset!r}")
        shape = tuple(tensor.shape)
        if len(shape) == 0:
            raise ValueError("baton.Sharded: a 0-dimensional tensor has no rows to shard")
        # Required (the extension could agree on dim 0 over the ranks, but
        # that is a collective, and a registration is made or reused per rank).
        global_shape = tuple(int(d) for d in global_shape)
        if len(global_shape) != len(shape) or global_shape[1:] != shape[1:]:
            raise ValueError(f"baton.Sharded: global_shape {global_shape} and the shard's shape {shape} "
                             "differ beyond dim 0")
        if offset + shape[0] > global_shape[0]:
            raise ValueError(f"baton.Sharded: rows [{offset}, {offset + shape[0]}) lie beyond "
                             f"global_shape[0] = {global_shape[0]}")
        self.tensor = tensor
        self.offset = offset
        self.global_shape = global_shape

    def __repr__(self):
        return (f"baton.Sharded(<{type(self.tensor).__name__} {tuple(self.tensor.shape)}>, "
                f"offset={self.offset}, global_shape={self.global_shape})")


class PerRank:
    """Marks state that is this rank's own, not the job's.

    ``baton.PerRank(obj)``: ``obj`` is an object with ``state_dict()`` and
    ``load_state_dict()`` (a data loader's per-rank cursor) or a dict,
    updated in place at restore. Its values (JSON-able only: no tensors)
    are saved as this rank's per-rank state and given back to the same rank
    at the same world size (baton.RNGState is one; at another world size
    it keeps its current values and rank 0 warns, see Checkpointer.restore's
    drop_rank_state_on_resize). Plain values elsewhere
    in the state dict are job-wide: rank 0's are kept.
    """

    __slots__ = ("obj",)
    _baton_per_rank = True

    def __init__(self, obj):
        if not isinstance(obj, dict) and not (callable(getattr(obj, "state_dict", None)) and
                                              callable(getattr(obj, "load_state_dict", None))):
            raise TypeError(f"baton.PerRank: {type(obj).__name__} is neither a dict nor an object with "
                            "state_dict()/load_state_dict()")
        self.obj = obj

    def state_dict(self):
        return dict(self.obj) if isinstance(self.obj, dict) else self.obj.state_dict()

    def load_state_dict(self, state):
        if isinstance(self.obj, dict):
            self.obj.clear()
            self.obj.update(state)
        else:
            self.obj.load_state_dict(state)

    def __repr__(self):
        return f"baton.PerRank({self.obj!r})"


def is_per_rank(value):
    return getattr(type(value), "_baton_per_rank", False) is True
