"""DTensor state through baton's DCP backend at another world size
(tests/python/dcp-reshard.sh: one launch per phase, on one directory).

save_at_N: FSDP2 (fully_shard, gloo on CPU) model + AdamW state after 3
  steps, and DTensors laid out Shard(1) and Replicate(), saved with
  dcp.save(BatonWriter); rank 0 also keeps every full tensor (reference.pt).
restore_at_M: the same model on M ranks (another mesh), dcp.load(BatonReader)
  + set_state_dict; every full tensor must equal the saved one exactly,
  and each rank reads only the chunks its new shards need.
The mesh comes from $BATON_DCP_MESH ("4", "2", "2x2"...).
"""
import os

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402

import dcp_fsdp_state as fs  # noqa: E402
import gloo_world  # noqa: E402

from baton.dcp import BatonReader, BatonWriter  # noqa: E402

RANK, SIZE, DIR, MESH = gloo_world.reshard_launch("BATON_DCP_RESHARD_DIR", "BATON_DCP_MESH")
REFERENCE = os.path.join(DIR, "reference.pt")


@pytest.fixture(scope="module")
def world():
    with gloo_world.reshard_world(RANK, SIZE, DIR, MESH) as rt:
        yield rt


def _save(rt):
    mesh = fs.mesh_of(MESH)
    model, optim = fs.build(mesh)
    fs.train(model, optim, 3)
    sd = fs.state(model, optim, mesh)
    dcp.save(sd, storage_writer=BatonWriter(os.path.join(DIR, "ckpt"), runtime=rt))
    ref = fs.full(sd)
    if RANK == 0:
        torch.save(ref, REFERENCE)
    dist.barrier()


def _restore(rt):
    mesh = fs.mesh_of(MESH)
    model, optim = fs.build(mesh)
    fs.train(model, optim, 1, first=50)  # other values everywhere, and AdamW's state exists
    sd = fs.state(model, optim, mesh)
    reader = BatonReader(os.path.join(DIR, "ckpt"), runtime=rt)
    dcp.load(sd, storage_reader=reader)
    fs.put(model, optim, sd)
    got = fs.full(fs.state(model, optim, mesh))
    ref = torch.load(REFERENCE, weights_only=True)
    assert sorted(got) == sorted(ref)
    for k in ref:
        assert got[k].dtype == ref[k].dtype and torch.equal(got[k], ref[k]), k
    # Only the chunks this rank's shards need: what is sharded over the
    # saving ranks is read in the new ranks' proportion (plus what is
    # replicated), never the whole.
    meta = reader.last_restore
    assert meta is not None and meta["fallbacks"] == []
    # read_metadata's read of the Metadata is its own restore; read_data reads it once more. Each chunk is
    # read twice (BatonReader restores with verify_before_write: every rank verifies every chunk before any
    # is written, then reads them again into DCP's targets), so a read's worth is half of bytes_read.
    return reader.bytes_read / 2 - reader.metadata_bytes


def test_save_at_4(world):
    _save(world)


def test_save_at_2(world):
    _save(world)


def test_restore_at_2(world):
    read = _restore(world)
    total = os.path.getsize(REFERENCE)  # about the whole state's bytes (and pickle's few)
    assert read < 0.7 * total, (read, total)


def test_restore_at_3(world):
    read = _restore(world)
    total = os.path.getsize(REFERENCE)
    # 2 -> 3: ranks 0 and 2 need one old shard each; rank 1's rows straddle
    # both old shards, so it reads both (whole chunks, each verified).
    assert read < (0.7 if RANK in (0, 2) else 1.1) * total, (RANK, read, total)
