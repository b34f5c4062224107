"""baton.dcp.staging without MPI (tests/python/pure-modules.sh): BatonWriter.stage's copy of a state for
dcp.async_save: what it copies and keeps as DCP's stager does, and the buffers it keeps for the next save."""
import io

import pytest

torch = pytest.importorskip("torch")

from baton.dcp.staging import StagingBuffers  # noqa: E402


class Save:
    """A save that reads a staged copy (open_checkpointers.InFlight's done())."""

    def __init__(self, done=True):
        self.is_done = done

    def done(self):
        return self.is_done


class Opaque:
    def __init__(self, items):
        self.items = items


def _state():
    w = torch.nn.Parameter(torch.randn(6, 4))  # requires grad: the copy is data only
    return {
        "model": {"w": w, "t": torch.arange(12.0).reshape(3, 4).t(),  # not contiguous
                  "scalar": torch.tensor(3.5), "empty": torch.zeros(0, 5, dtype=torch.int64)},
        "optim": {"state": {0: {"step": torch.tensor(7.0), "exp_avg": torch.ones(6, 4)}},
                  "param_groups": [{"lr": 0.1, "betas": (0.9, 0.99), "params": [0], "name": None}]},
        "blob": io.BytesIO(b"abc"), "raw": b"xy", "obj": Opaque([1, 2]),
    }


def test_a_stage_copies_every_tensor_into_memory_of_its_own_in_the_same_structure():
    sd = _state()
    staged = StagingBuffers().stage(sd, Save())
    m, s = sd["model"], staged["model"]
    for k in m:
        assert s[k].dtype == m[k].dtype and s[k].shape == m[k].shape and torch.equal(s[k], m[k].detach()), k
        assert s[k].numel() == 0 or s[k].data_ptr() != m[k].data_ptr(), k
        assert not s[k].requires_grad, k
    # Later changes to the state never reach the copy.
    with torch.no_grad():
        m["w"].add_(1)
    sd["optim"]["state"][0]["exp_avg"].mul_(3)
    assert torch.equal(staged["optim"]["state"][0]["exp_avg"], torch.ones(6, 4))
    assert not torch.equal(staged["model"]["w"], m["w"].detach())
    # Containers rebuilt (a tuple stays a tuple), plain values as they are, other objects deep-copied (DCP's rule).
    group = staged["optim"]["param_groups"][0]
    assert group == sd["optim"]["param_groups"][0] and group is not sd["optim"]["param_groups"][0]
    assert isinstance(group["betas"], tuple) and group["params"] is not sd["optim"]["param_groups"][0]["params"]
    assert staged["blob"] is sd["blob"] and staged["raw"] is sd["raw"]
    assert staged["obj"] is not sd["obj"] and staged["obj"].items == [1, 2]


def test_the_next_stage_of_the_same_layout_copies_into_the_same_buffers():
    pool = StagingBuffers()
    sd = _state()
    first = pool.stage(sd, Save())
    ptrs = {k: v.data_ptr() for k, v in first["model"].items() if v.numel()}
    assert pool.nbytes() == sum(v.numel() * v.element_size() for v in first["model"].values()) + 4 + 6 * 4 * 4
    with torch.no_grad():
        sd["model"]["w"].fill_(2.0)
    second = pool.stage(sd, Save())
    assert {k: v.data_ptr() for k, v in second["model"].items() if v.numel()} == ptrs
    assert torch.equal(second["model"]["w"], torch.full((6, 4), 2.0))


def test_a_tensor_that_changed_shape_or_dtype_gets_a_new_buffer_and_the_others_keep_theirs():
    pool = StagingBuffers()
    sd = _state()
    first = pool.stage(sd, Save())
    sd["model"]["w"] = torch.randn(8, 4)  # a new shape
    sd["model"]["t"] = sd["model"]["t"].double()  # a new dtype
    sd["model"]["new"] = torch.ones(2)  # a new place
    second = pool.stage(sd, Save())
    assert second["model"]["w"].data_ptr() != first["model"]["w"].data_ptr()
    assert second["model"]["t"].data_ptr() != first["model"]["t"].data_ptr()
    assert second["optim"]["state"][0]["exp_avg"].data_ptr() == first["optim"]["state"][0]["exp_avg"].data_ptr()
    for k in ("w", "t", "new"):
        assert second["model"][k].dtype == sd["model"][k].dtype and torch.equal(second["model"][k], sd["model"][k])
    # A place gone from the state frees its buffer: only what the last stage used is kept.
    del sd["model"]["new"]
    pool.stage(sd, Save())
    assert ("model", "new") not in pool._kept


def test_one_tensor_twice_in_a_state_is_staged_twice_and_nothing_is_kept_when_asked():
    t = torch.arange(4.0)
    pool = StagingBuffers()
    staged = pool.stage({"a": t, "b": [t, t]}, Save())
    ptrs = {staged["a"].data_ptr(), staged["b"][0].data_ptr(), staged["b"][1].data_ptr()}
    assert len(ptrs) == 3 and all(torch.equal(x, t) for x in (staged["a"], *staged["b"]))
    again = pool.stage({"a": t, "b": [t, t]}, Save(), keep=False)
    assert torch.equal(again["a"], t) and pool.nbytes() == 0
    pool.stage({"a": t}, Save())
    assert pool.nbytes() == 16
    pool.clear()
    assert pool.nbytes() == 0
    # A copy no save reads (no reader: its caller keeps it) is never kept, so never written again.
    mine = pool.stage({"a": t})
    assert pool.nbytes() == 0 and pool.stage({"a": t}, Save())["a"].data_ptr() != mine["a"].data_ptr()


def test_buffers_a_save_still_reads_are_never_written_a_new_copy_goes_to_new_memory():
    """The save that read the kept buffers not done (in flight on another directory, its dcp.async_save
    interrupted, a second program thread): the next staging copies into new memory and keeps them as they are;
    once that save is done, the one after copies into them again."""
    pool = StagingBuffers()
    reading = Save(done=False)
    kept = pool.stage({"w": torch.ones(6)}, reading)["w"]
    other = pool.stage({"w": torch.zeros(6)}, Save())
    assert other["w"].data_ptr() != kept.data_ptr() and torch.equal(kept, torch.ones(6))
    assert pool._kept[("w",)] is kept and pool._reader is reading
    reading.is_done = True
    again = pool.stage({"w": torch.full((6,), 3.0)}, Save())
    assert again["w"].data_ptr() == kept.data_ptr() and torch.equal(kept, torch.full((6,), 3.0))
    # Another thread staging at this moment (the lock held) gets new memory too.
    with pool._lock:
        assert pool.stage({"w": torch.zeros(6)}, Save())["w"].data_ptr() != kept.data_ptr()


def test_a_sharded_tensor_is_staged_as_a_copy_of_its_own():
    """A ShardedTensor (torch.distributed._shard, deprecated) copied whole: later changes to its local shard do
    not reach the staged one (torch 2.5's DCP stager handed back the live object)."""
    import socket

    import torch.distributed as dist
    from torch.distributed._shard.metadata import ShardMetadata
    from torch.distributed._shard.sharded_tensor import Shard, init_from_local_shards

    made = not dist.is_initialized()
    if made:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=0, world_size=1)
    try:
        local = torch.arange(8.0).reshape(2, 4)
        st = init_from_local_shards([Shard(local, ShardMetadata([0, 0], [2, 4], "rank:0/cpu"))], [2, 4])
        staged = StagingBuffers().stage({"st": st}, Save())["st"]
        shard = staged.local_shards()[0].tensor
        assert staged is not st and shard.data_ptr() != local.data_ptr()
        local.add_(100)
        assert torch.equal(shard, torch.arange(8.0).reshape(2, 4))
    finally:
        if made:
            dist.destroy_process_group()
