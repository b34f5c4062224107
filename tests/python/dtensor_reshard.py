"""DTensor state through baton.Checkpointer at another world size
(tests/python/dcp-reshard.sh: one launch per phase, beside dcp_reshard.py;
one directory per pair).

save_at_N: FSDP2 (fully_shard, gloo on CPU) model + AdamW state after 3 steps
  (get_state_dict: DTensor exp_avg, exp_avg_sq, and step) and DTensors laid
  out Shard(1) and Replicate(), saved by baton.Checkpointer; rank 0 keeps every
  full tensor (reference.pt). Then a fresh model on the same mesh restores in
  place and must hold every full tensor exactly (the 2-D mesh's own case).
restore_at_M: the same model on M ranks (another mesh): every full tensor
  equals the saved one exactly, and each rank reads only the rows its new
  shards need.
The mesh comes from $BATON_DTENSOR_MESH ("4", "2", "2x2"...).
"""
import os

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import dcp_fsdp_state as fs  # noqa: E402
import gloo_world  # noqa: E402

import baton  # noqa: E402

RANK, SIZE, DIR, MESH = gloo_world.reshard_launch("BATON_DTENSOR_RESHARD_DIR", "BATON_DTENSOR_MESH")
REFERENCE = os.path.join(DIR, "reference.pt")


@pytest.fixture(scope="module")
def world():
    with gloo_world.reshard_world(RANK, SIZE, DIR, MESH) as rt:
        yield rt


def _state(model, optim, mesh):
    return {"train": fs.Training(model, optim), "extra": fs.extras(mesh)}


def _full(model, optim, extra, mesh):
    sd = fs.state(model, optim, mesh)
    sd["extra"] = extra
    return fs.full(sd)


def _restored(rt, mesh):
    """A fresh model trained elsewhere, then restored from the directory; (its full tensors, the checkpointer)."""
    model, optim = fs.build(mesh)
    fs.train(model, optim, 1, first=50)  # other values everywhere, and AdamW's state exists
    state = _state(model, optim, mesh)
    for v in state["extra"].values():
        v.to_local().zero_()
    ck = baton.Checkpointer(rt, dir=os.path.join(DIR, "ckpt"))
    assert ck.restore(state) == 3
    return _full(model, optim, state["extra"], mesh), ck


def _assert_equal(got, ref):
    assert sorted(got) == sorted(ref)
    assert any(k.endswith("exp_avg_sq") for k in ref) and any(k.endswith(".step") for k in ref), sorted(ref)
    for k in ref:
        assert got[k].dtype == ref[k].dtype and torch.equal(got[k], ref[k]), k


def _save(rt):
    mesh = fs.mesh_of(MESH)
    model, optim = fs.build(mesh)
    fs.train(model, optim, 3)
    state = _state(model, optim, mesh)
    ck = baton.Checkpointer(rt, dir=os.path.join(DIR, "ckpt"))
    ck.save(state, 3)
    ck.close()
    ref = _full(model, optim, state["extra"], mesh)
    if RANK == 0:
        torch.save(ref, REFERENCE)
    got, ck = _restored(rt, mesh)  # in place, at the mesh that saved
    ck.close()
    _assert_equal(got, ref)
    dist.barrier()


def _restore(rt):
    got, ck = _restored(rt, fs.mesh_of(MESH))
    # Whole HDF5 chunks, each read to verify it; twice (Checkpointer.restore verifies every rank's
    # chunks before it writes any, then reads them again into the state: verify_before_write), so
    # a read's worth is half of it (the first read's replicated parts are smaller still).
    read = ck.last_stats()["bytes_read"] / 2
    info = ck.last_restore()
    ck.close()
    assert info["fallbacks"] == []
    _assert_equal(got, torch.load(REFERENCE, weights_only=True))
    assert read > 0
    print("rank %d of %d read %d bytes (the saved state: %d)" % (RANK, SIZE, read, os.path.getsize(REFERENCE)))
    return read


def test_save_at_4(world):
    _save(world)


def test_save_at_2(world):
    _save(world)


def test_restore_at_2(world):
    read = _restore(world)
    total = os.path.getsize(REFERENCE)  # about the whole state's bytes (and pickle's few)
    # Half of what is sharded, and the small replicated tensors: never the whole.
    assert read < 0.7 * total, (read, total)


def test_restore_at_3(world):
    read = _restore(world)
    total = os.path.getsize(REFERENCE)
    # 2 -> 3: ranks 0 and 2 need rows of one saved box each; rank 1's rows straddle both.
    assert read < (0.7 if RANK in (0, 2) else 1.1) * total, (RANK, read, total)
