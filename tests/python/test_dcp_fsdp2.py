"""FSDP2 (fully_shard, gloo on CPU) model + AdamW state through baton's DCP
backend at the same world size: training resumed from the checkpoint ends
bit for bit where an uninterrupted run ends (tests/python/run-pytest)."""
import pytest

torch = pytest.importorskip("torch")
dcp = pytest.importorskip("torch.distributed.checkpoint")

import dcp_fsdp_state as fs  # noqa: E402
import conftest  # noqa: E402  (tests/python/conftest.py: the launcher's rank and size)
import gloo_world  # noqa: E402

from baton.dcp import BatonReader, BatonWriter  # noqa: E402


@pytest.fixture(scope="module")
def dist():
    d = gloo_world.world(conftest.RANK, conftest.SIZE, "test_dcp_fsdp2")
    yield d
    gloo_world.close()


def test_fsdp2_resume_is_bit_for_bit(dist, rt, shared_dir, size):
    """Train 3, save, train 3 more; a fresh model that loads the save and trains the same 3 ends identical."""
    mesh = fs.mesh_of((size,))
    model, optim = fs.build(mesh)
    fs.train(model, optim, 3)
    dcp.save(fs.state(model, optim, mesh), storage_writer=BatonWriter(shared_dir, step=3, runtime=rt))
    fs.train(model, optim, 3, first=3)
    want = fs.full(fs.state(model, optim, mesh))

    model2, optim2 = fs.build(mesh)
    fs.train(model2, optim2, 1, first=50)  # different values and an AdamW state to overwrite
    sd = fs.state(model2, optim2, mesh)
    reader = BatonReader(shared_dir, runtime=rt)
    dcp.load(sd, storage_reader=reader)
    fs.put(model2, optim2, sd)
    assert reader.last_restore["step"] == 3
    # At the world size that saved, every target (FSDP2's row shards, the Shard(1) and Replicate() DTensors'
    # local tensors) is its saved box whole: read into it, no scratch (baton.dcp.read_targets).
    assert reader.scratch_bytes == 0, reader.scratch_bytes
    fs.train(model2, optim2, 3, first=3)
    got = fs.full(fs.state(model2, optim2, mesh))
    assert sorted(got) == sorted(want)
    for k in want:
        assert torch.equal(got[k], want[k]), k
