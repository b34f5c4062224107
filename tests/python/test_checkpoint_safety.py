"""What a checkpoint cannot do to the program that reads it (issue 46): run code
(a planted __reduce__ in DCP's .metadata, a bytes entry, baton's dcp-metadata
array) on any path that reads one, nor leave bytes that failed verification
in the program's tensors. tests/python/run-pytest runs these on every rank;
the commands (`baton ckpt import|export`) run on rank 0 as processes of
their own, the loads on every rank."""
import glob
import json
import os
import pickle
import subprocess
import traceback

import numpy as np
import pytest

torch = pytest.importorskip("torch")
dcp = pytest.importorskip("torch.distributed.checkpoint")
from torch.distributed.checkpoint import FileSystemWriter  # noqa: E402

import conftest  # noqa: E402
import gloo_world  # noqa: E402
import test_dcp_backend as backend  # noqa: E402  (its helpers; a module, so pytest does not collect its tests twice)

from baton import _baton  # noqa: E402
from baton.dcp import BatonReader, BatonWriter  # noqa: E402

BATON_CLI = os.path.join(os.environ.get("BATON_BUILD_DIR", ""), "cli", "baton")


class Planted:
    """Unpickled by an unpickler that runs code, it creates the file `marker`."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture(scope="module")
def dist():
    d = gloo_world.world(conftest.RANK, conftest.SIZE, "test_checkpoint_safety")
    yield d
    gloo_world.close()


def _cli(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_", "OPAL_"))}
    p = subprocess.run([BATON_CLI, "ckpt"] + [str(a) for a in args], capture_output=True, text=True, env=env,
                       timeout=240)
    return p.returncode, p.stdout, p.stderr


def _text(e):
    return "".join(traceback.format_exception(e))


def test_import_runs_no_code_from_a_dcp_directory(dist, shared_dir, rank):
    """`baton ckpt import` of a DCP directory whose .metadata, or one of whose bytes entries, holds a planted
    __reduce__: the command fails naming the entry, and the file the code would create does not exist."""
    if rank == 0:
        if not os.path.exists(BATON_CLI):
            pytest.skip("the baton command is not built")
        marker = os.path.join(shared_dir, "code-ran")
        good = {"w": torch.arange(6.0)}
        entry = os.path.join(shared_dir, "entry")
        dcp.save({"w": torch.arange(6.0), "evil": Planted(marker)}, storage_writer=FileSystemWriter(entry),
                 no_dist=True)
        meta = os.path.join(shared_dir, "meta")
        dcp.save(good, storage_writer=FileSystemWriter(meta), no_dist=True)
        with open(os.path.join(meta, ".metadata"), "wb") as f:
            pickle.dump(Planted(marker), f)
        for source, named in ((entry, "the bytes entry 'evil'"), (meta, os.path.join(meta, ".metadata"))):
            rc, out, err = _cli("import", source, os.path.join(shared_dir, "into-" + os.path.basename(source)))
            assert rc != 0 and named in err and "refused to unpickle" in err, (source, rc, out, err)
            assert not os.path.exists(marker), (source, err)
    dist.barrier()


def test_export_and_load_run_no_code_from_a_bytes_entry(dist, rt, shared_dir, rank):
    """A bytes entry with a planted __reduce__ written through BatonWriter: dcp.load with BatonReader (every rank)
    and `baton ckpt export` (both formats) fail naming the entry; nothing runs; the tensors keep their values."""
    marker = os.path.join(shared_dir, "code-ran")
    dcp.save({"w": torch.arange(6.0), "evil": Planted(marker)}, storage_writer=BatonWriter(shared_dir, runtime=rt))
    target = {"w": torch.full((6,), 2.0), "evil": None}
    with pytest.raises(BaseException) as info:  # DCP's CheckpointException is a BaseException
        dcp.load(target, storage_reader=BatonReader(shared_dir, runtime=rt))
    assert "the value at 'evil'" in _text(info.value) and "refused to unpickle" in _text(info.value), _text(info.value)
    assert torch.equal(target["w"], torch.full((6,), 2.0)) and target["evil"] is None
    assert not os.path.exists(marker)
    dist.barrier()
    if rank == 0 and os.path.exists(BATON_CLI):
        for fmt in ("torch", "dcp"):
            rc, out, err = _cli("export", shared_dir, os.path.join(shared_dir, "out-" + fmt), "--format", fmt)
            assert rc != 0 and "the value at 'evil'" in err, (fmt, rc, out, err)
            assert not os.path.exists(marker) and not os.path.exists(os.path.join(shared_dir, "out-" + fmt))
    dist.barrier()


def test_read_metadata_runs_no_code_from_a_dcp_metadata_array(dist, rt, shared_dir):
    """A dcp-metadata array anyone can write with ArrayCheckpointer, holding a planted __reduce__: read_metadata
    refuses it naming the array; nothing runs."""
    marker = os.path.join(shared_dir, "code-ran")
    blob = np.frombuffer(bytearray(pickle.dumps(Planted(marker))), np.uint8)
    ck = _baton.ArrayCheckpointer(rt, dir=shared_dir)
    try:
        ck.register_sharded("dcp-metadata", blob if rt.rank == 0 else blob[:0], offset=0, global_shape=[blob.size])
        ck.save(1)
    finally:
        ck.close()
    with pytest.raises(_baton.InvalidArgument) as info:
        BatonReader(shared_dir, runtime=rt).read_metadata()
    assert "'dcp-metadata' array" in str(info.value) and "refused to unpickle" in str(info.value), info.value
    assert not os.path.exists(marker)


def test_a_failed_load_leaves_the_tensors_as_they_were(dist, rt, shared_dir, rank):
    """One version, a flipped byte: dcp.load with BatonReader fails (no older version to fall back to) and the
    program's tensors hold exactly what they held (defect 1: they held 2.0000038)."""
    dcp.save({"w": torch.full((1000,), 2.5), "b": torch.arange(8)}, storage_writer=BatonWriter(shared_dir, runtime=rt))
    dist.barrier()
    if rank == 0:
        backend._flip_data_byte(backend._versions(shared_dir)[-1], "w")
    dist.barrier()
    target = {"w": torch.full((1000,), 2.0), "b": torch.zeros(8, dtype=torch.int64)}
    with pytest.raises(BaseException) as info:
        dcp.load(target, storage_reader=BatonReader(shared_dir, runtime=rt))
    assert "could be restored" in _text(info.value) and "dataset w " in _text(info.value), _text(info.value)
    assert torch.equal(target["w"], torch.full((1000,), 2.0)) and torch.equal(target["b"], torch.zeros(8, dtype=torch.int64))


def _flip_last_chunk(version, array, nbytes):
    """Flips a byte near the end of `array`'s data (`nbytes` in all), in its last chunk: a load that wrote each
    chunk as it verified it would have written all the others before it found this one."""
    for index in glob.glob(os.path.join(version, "shard-*.json")):
        with open(index) as f:
            shard = json.load(f)
        for ds in shard["datasets"]:
            if ds["array"] == array:
                with open(os.path.join(version, shard["file"]), "r+b") as f:
                    f.seek(ds["offset"] + nbytes - 5)
                    b = f.read(1)
                    f.seek(ds["offset"] + nbytes - 5)
                    f.write(bytes([b[0] ^ 0x40]))
                return
    raise AssertionError("no dataset of %s in %s" % (array, version))


def _two_versions_newest_damaged(dist, rt, shared_dir, rank, older, newer, n):
    dcp.save(older, storage_writer=BatonWriter(shared_dir, step=1, runtime=rt))
    dcp.save(newer, storage_writer=BatonWriter(shared_dir, step=2, runtime=rt))
    dist.barrier()
    if rank == 0:
        _flip_last_chunk(backend._versions(shared_dir)[-1], "w", n * 4)
    dist.barrier()


def test_a_damaged_version_falls_back_to_an_older_one_of_the_same_plan(dist, rt, shared_dir, rank):
    """The newest version's last chunk of w fails verification and the older version holds the same state (other
    values): the load restores the older one into the targets themselves, which hold its bytes, every one."""
    n = 1 << 20  # 4 MiB of float32: two chunks
    _two_versions_newest_damaged(dist, rt, shared_dir, rank, {"w": torch.full((n,), 1.0), "b": torch.arange(8)},
                                 {"w": torch.full((n,), 3.0), "b": torch.arange(8) * 3}, n)
    target = {"w": torch.full((n,), 2.0), "b": torch.zeros(8, dtype=torch.int64)}
    reader = BatonReader(shared_dir, runtime=rt)
    dcp.load(target, storage_reader=reader)
    assert torch.equal(target["w"], torch.full((n,), 1.0)) and torch.equal(target["b"], torch.arange(8))
    assert reader.scratch_bytes == 0
    assert reader.last_restore["step"] == 1, reader.last_restore
    (skipped,) = reader.last_restore["fallbacks"]
    assert skipped["step"] == 2 and "dataset w " in skipped["reason"], skipped


def test_a_damaged_version_with_an_older_one_of_another_plan_leaves_the_targets_untouched(dist, rt, shared_dir,
                                                                                        rank):
    """The newest version's last chunk of w fails verification and the older version holds another state (no b):
    the plan made on the newest does not hold for it, so the load fails naming both versions, and the targets
    (read into directly) hold exactly what they held."""
    n = 1 << 20
    _two_versions_newest_damaged(dist, rt, shared_dir, rank, {"w": torch.full((n,), 1.0)},
                                 {"w": torch.full((n,), 3.0), "b": torch.arange(8)}, n)
    older, newest = (os.path.basename(v) for v in backend._versions(shared_dir))
    target = {"w": torch.full((n,), 2.0), "b": torch.zeros(8, dtype=torch.int64)}
    with pytest.raises(BaseException) as info:
        dcp.load(target, storage_reader=BatonReader(shared_dir, runtime=rt))
    text = _text(info.value)
    assert newest in text and older in text and "holds other DCP Metadata" in text, text
    assert torch.equal(target["w"], torch.full((n,), 2.0)) and torch.equal(target["b"], torch.zeros(8, dtype=torch.int64))


def _reseal(path):
    """manifest.json made whole again after an edit (its last key, the xxh3 of every byte before it, recomputed
    through libxxhash), as a hostile writer could."""
    import ctypes

    x = ctypes.CDLL("libxxhash.so.0")
    x.XXH3_64bits.restype = ctypes.c_uint64
    x.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    with open(path, "rb") as f:
        t = f.read()
    key = t.rindex(b'"manifest_xxh3": "')
    with open(path, "wb") as f:
        f.write(t[:key] + b'"manifest_xxh3": "%016x"\n}\n' % x.XXH3_64bits(t[:key], key))


def _forge_shape(version, array, rows):
    """Sets `array`'s first dimension in the version's manifest to `rows`, checksum recomputed."""
    import re

    path = os.path.join(version, "manifest.json")
    with open(path, "rb") as f:
        t = f.read()
    at = t.index(b'"name": "%s"' % array.encode())
    m = re.compile(rb'"shape": \[(\d+)').search(t, at)
    with open(path, "wb") as f:
        f.write(t[:m.start(1)] + str(rows).encode() + t[m.end(1):])
    _reseal(path)


def test_a_forged_size_falls_back_to_the_intact_version(dist, rt, shared_dir, rank):
    """The newest version's manifest says its array holds 32 TiB (checksum recomputed): the load restores the
    older version and names the forged one, allocating nothing by it (defect 12: MemoryError)."""
    dcp.save({"w": torch.arange(10.0)}, storage_writer=BatonWriter(shared_dir, step=1, runtime=rt))
    dcp.save({"w": torch.arange(10.0)}, storage_writer=BatonWriter(shared_dir, step=2, runtime=rt))
    dist.barrier()
    if rank == 0:
        _forge_shape(backend._versions(shared_dir)[-1], "w", 1 << 45)
    dist.barrier()
    target = {"w": torch.zeros(10)}
    reader = BatonReader(shared_dir, runtime=rt)
    dcp.load(target, storage_reader=reader)
    assert torch.equal(target["w"], torch.arange(10.0))
    assert reader.last_restore["step"] == 1, reader.last_restore
    (skipped,) = reader.last_restore["fallbacks"]
    assert skipped["step"] == 2 and "forged or damaged manifest" in skipped["reason"], skipped


def test_a_dcp_directory_is_named_not_taken_for_a_first_run(dist, rt, shared_dir, rank):
    """A DCP FileSystemWriter directory: Checkpointer, BatonReader and `baton ckpt ls` refuse it naming what it is
    and the command that imports it; nothing is written into it (defect 13: run, events, writer.lock)."""
    import baton

    d = os.path.join(shared_dir, "dcp")
    if rank == 0:
        dcp.save({"w": torch.arange(4.0)}, storage_writer=FileSystemWriter(d), no_dist=True)
    dist.barrier()
    before = sorted(os.listdir(d))
    with pytest.raises(baton.InvalidArgument, match="holds a DCP checkpoint.*baton ckpt import"):
        baton.Checkpointer(rt, dir=d)
    with pytest.raises(BaseException) as info:
        dcp.load({"w": torch.zeros(4)}, storage_reader=BatonReader(d, runtime=rt))
    assert "holds a DCP checkpoint" in _text(info.value), _text(info.value)
    assert sorted(os.listdir(d)) == before
    assert baton.latest(d) is None
    if rank == 0 and os.path.exists(BATON_CLI):
        rc, out, err = _cli("ls", d)
        assert rc != 0 and "holds no baton version" in err and "baton ckpt import" in err, (rc, out, err)
    dist.barrier()


def test_a_directory_of_other_files_is_not_a_first_run(dist, rt, shared_dir, rank):
    """Issue 46 item 6: Checkpointer.restore in a directory that holds files baton did not write (here a
    torch.save file) and no version raises on every rank, naming them, where it returned None (a silent first
    run from scratch); baton's own files of an earlier open (a version set aside for removal among them) and an
    empty directory made by another tool still make a first run."""
    import baton

    d, fresh = os.path.join(shared_dir, "other"), os.path.join(shared_dir, "fresh")
    if rank == 0:
        os.makedirs(os.path.join(fresh, "lightning"))  # made before anything is written into it
        # A version retention renamed away, its removal cut short by a dead process: baton's, never foreign.
        os.makedirs(os.path.join(fresh, ".removing-v00000001-s1"))
        with open(os.path.join(fresh, ".removing-v00000001-s1", "shard-00000.h5"), "wb") as f:
            f.write(b"x")
        os.makedirs(d)
        torch.save({"w": torch.arange(4.0)}, os.path.join(d, "epoch3.pt"))
    dist.barrier()
    with baton.Checkpointer(rt, dir=d) as ck:
        with pytest.raises(baton.InvalidArgument) as info:
            ck.restore({"w": torch.zeros(4)})
    text = _text(info.value)
    assert "holds no baton version" in text and "not taken for a first run" in text, text
    if rank == 0:
        assert "'epoch3.pt'" in text and "baton ckpt import" in text, text
        if os.path.exists(BATON_CLI):  # the Checkpointer's own files aside, one entry: said in the singular
            rc, out, err = _cli("ls", d)
            assert rc != 0 and "holds no baton version (it holds 1 other entry)" in err, (rc, out, err)
    for _ in range(2):  # the second open finds the first one's run file, lock and event log: still a first run
        with baton.Checkpointer(rt, dir=fresh) as ck:
            assert ck.restore({"w": torch.zeros(4)}) is None
    dist.barrier()


def test_a_reader_creates_and_writes_nothing(dist, rt, shared_dir, rank):
    """BatonReader on a mistyped path fails naming it and creates nothing; a load writes nothing into the directory
    it reads (no lock taken, no run file, no event log of its own); baton.latest answers the step without an
    exception. The one change allowed: the program's own event log, which its BatonWriter opened in that
    directory, gains the load's restore records (the process's log records its restores, so that `baton
    report` says where a job resumed)."""
    import baton

    typo = os.path.join(shared_dir, "no-such-dir")
    with pytest.raises(BaseException) as info:
        dcp.load({"w": torch.zeros(4)}, storage_reader=BatonReader(typo, runtime=rt))
    assert "does not exist" in _text(info.value), _text(info.value)
    assert not os.path.exists(typo)
    d = os.path.join(shared_dir, "ck")
    assert baton.latest(d) is None
    # Closed before the reader comes (a writer keeps the directory's lock between saves; a reader would close
    # it, and the lock's release is the writer's write, not the reader's).
    with BatonWriter(d, step=6, runtime=rt) as writer:
        dcp.save({"w": torch.arange(4.0)}, storage_writer=writer)
    dist.barrier()

    def tree():
        out = {}
        for root, dirs, files in os.walk(d):
            for n in dirs + files:
                st = os.lstat(os.path.join(root, n))
                out[os.path.join(root, n)] = (st.st_size, st.st_mtime_ns)
        return out

    logs = set(glob.glob(os.path.join(d, "events", "*.jsonl")))  # every rank's own, opened by its BatonWriter
    mine = [p for p in logs if p.endswith("-r%d.jsonl" % rank)]
    assert len(mine) == 1 and len(logs) == conftest.SIZE, logs
    log_before = open(mine[0], "rb").read()
    before = {k: v for k, v in tree().items() if k not in logs}
    target = {"w": torch.zeros(4)}
    dcp.load(target, storage_reader=BatonReader(d, runtime=rt))
    assert torch.equal(target["w"], torch.arange(4.0))
    after = {k: v for k, v in tree().items() if k not in logs}
    assert after == before, sorted(set(after.items()) ^ set(before.items()))
    log_after = open(mine[0], "rb").read()
    assert log_after.startswith(log_before), (log_before, log_after)
    added = [json.loads(line) for line in log_after[len(log_before):].splitlines()]
    assert added and {r["ev"] for r in added} == {"restore"}, added
    assert added[-1]["ok"] and added[-1]["step"] == 6, added
    assert baton.latest(d) == 6
    dist.barrier()


def test_every_reader_reads_every_writer(dist, rt, shared_dir):
    """One format (issue 46 item 1): Checkpointer.restore reads what dcp.save with BatonWriter wrote (a module's
    state dict, an optimizer's with int parameter ids, values) and dcp.load with BatonReader what Checkpointer
    wrote; before, each refused the other's and named another reader."""
    import baton

    a, b = os.path.join(shared_dir, "dcp"), os.path.join(shared_dir, "sd")
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    model(torch.randn(5, 4)).sum().backward()
    opt.step()
    dcp.save({"model": model.state_dict(), "optim": opt.state_dict(), "epoch": 7, "pair": ("x", 1)},
             storage_writer=BatonWriter(a, step=4, runtime=rt))
    m2 = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    o2 = torch.optim.AdamW(m2.parameters(), lr=0.5)
    state = {"model": m2, "optim": o2, "epoch": 0, "pair": None}
    with baton.Checkpointer(rt, dir=a) as ck:
        assert ck.restore(state) == 4
    for k, v in model.state_dict().items():
        assert torch.equal(v, m2.state_dict()[k]), k
    assert (state["epoch"], state["pair"], o2.param_groups[0]["lr"]) == (7, ("x", 1), 0.01)
    assert sorted(o2.state_dict()["state"]) == sorted(opt.state_dict()["state"])  # int ids, not "0"
    for i, s in opt.state_dict()["state"].items():
        assert all(torch.equal(s[k], o2.state_dict()["state"][i][k]) for k in s), i
    with baton.Checkpointer(rt, dir=b) as ck:
        ck.save({"model": model, "epoch": 9}, 3)
    m3 = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    sd = {"model": m3.state_dict(), "epoch": 0}
    dcp.load(sd, storage_reader=BatonReader(b, runtime=rt))
    m3.load_state_dict(sd["model"])
    assert sd["epoch"] == 9 and all(torch.equal(v, m3.state_dict()[k]) for k, v in model.state_dict().items())
    # `baton ckpt export` of what Checkpointer wrote (it refused: "was not written through DCP").
    dist.barrier()
    if rt.rank == 0 and os.path.exists(BATON_CLI):
        out = os.path.join(shared_dir, "out.pt")
        rc, so, err = _cli("export", b, out, "--format", "torch")
        assert rc == 0, (rc, so, err)
        back = torch.load(out, weights_only=True)
        assert back["epoch"] == 9 and torch.equal(back["model"]["0.weight"], model.state_dict()["0.weight"]), back
    dist.barrier()


def test_every_reader_reads_every_writer_in_every_dtype(dist, rt, shared_dir):
    """Issue 46 item 5: complex64/128 and the float8 variants, saved by either front end in the one stored form
    (complex as float pairs, float8 variants as bytes), are read bit for bit by Checkpointer.restore, dcp.load
    with BatonReader and `baton ckpt export`; before, Checkpointer refused complex tensors and the float8
    variants baton has no dtype of."""
    import baton

    g = torch.Generator().manual_seed(46)
    base = torch.randn(6, 4, generator=g)
    want = {"c64": torch.complex(base, -base), "c128": torch.complex(base, base * 2).to(torch.complex128),
            "e4m3": base.to(torch.float8_e4m3fn), "f32": base}
    for name in ("float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"):
        if hasattr(torch, name):
            want[name] = base.abs().to(getattr(torch, name))

    def same(got):
        for k, v in want.items():
            assert got[k].dtype == v.dtype and got[k].shape == v.shape, (k, got[k].dtype, got[k].shape)
            assert torch.equal(got[k].reshape(-1).view(torch.uint8), v.reshape(-1).view(torch.uint8)), k

    a, b = os.path.join(shared_dir, "dcp"), os.path.join(shared_dir, "sd")
    dcp.save(dict(want), storage_writer=BatonWriter(a, step=1, runtime=rt))
    with baton.Checkpointer(rt, dir=b) as ck:
        ck.save(dict(want), 2)
    for d, step in ((a, 1), (b, 2)):
        got = {k: torch.zeros_like(v) for k, v in want.items()}
        with baton.Checkpointer(rt, dir=d) as ck:
            assert ck.restore(got) == step
        same(got)
        got = {k: torch.zeros_like(v) for k, v in want.items()}
        dcp.load(got, storage_reader=BatonReader(d, runtime=rt))
        same(got)
    dist.barrier()
    if rt.rank == 0 and os.path.exists(BATON_CLI):
        out = os.path.join(shared_dir, "out.pt")
        rc, so, err = _cli("export", b, out, "--format", "torch")
        assert rc == 0, (rc, so, err)
        same(torch.load(out, weights_only=True))
        # inspect's columns line up whatever the dtype's name (float8_e4m3fnuz overran a fixed width before).
        rc, so, err = _cli("inspect", b)
        assert rc == 0, (rc, so, err)
        table = so[so.index("\nTENSOR") + 1:].split("\n\n")[0].splitlines()
        assert len(table) == 1 + len(want), so
        rows = {line.split()[0]: line for line in table[1:]}
        starts = {table[0].index("DTYPE")} | {rows[k].index(str(v.dtype)[6:], len(k)) for k, v in want.items()}
        assert len(starts) == 1, so
        assert len({table[0].index("SHAPE")} | {line.index("[") for line in table[1:]}) == 1, so
    dist.barrier()


FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "format-2026-12-06")


def test_versions_written_before_stay_readable(dist, rt, shared_dir, rank):
    """The checked-in versions of 2026-12-06 (fixtures/make_format_fixture.py: a Checkpointer save at step 5, a
    dcp.save with BatonWriter at step 3, one rank) restore at this launch's world size, exactly."""
    import shutil

    import baton
    from fixtures import make_format_fixture as made

    if rank == 0:
        shutil.copytree(FIXTURE, os.path.join(shared_dir, "copy"))
    dist.barrier()
    want = made.state()
    a, b = os.path.join(shared_dir, "copy", "checkpointer"), os.path.join(shared_dir, "copy", "dcp")
    assert (baton.latest(a), baton.latest(b)) == (5, 3)
    got = {"model": {k: torch.zeros_like(v) for k, v in want["model"].items()}, "epoch": None, "tag": None}
    with baton.Checkpointer(rt, dir=a) as ck:
        assert ck.restore(got) == 5
    loaded = {"model": {k: torch.zeros_like(v) for k, v in want["model"].items()}, "epoch": 0, "tag": ""}
    dcp.load(loaded, storage_reader=BatonReader(b, runtime=rt))
    # The pickled-Metadata form of then: BatonReader reads it; Checkpointer names it and the one conversion.
    with baton.Checkpointer(rt, dir=b) as ck:
        with pytest.raises(baton.InvalidArgument, match=r"BatonReader\(dir\).*baton ckpt export.*baton ckpt import"):
            ck.restore({"model": {k: torch.zeros_like(v) for k, v in want["model"].items()}})
    for out in (got, loaded):
        assert (out["epoch"], out["tag"]) == (want["epoch"], want["tag"])
        for k, v in want["model"].items():
            assert out["model"][k].dtype == v.dtype and torch.equal(out["model"][k], v), k
