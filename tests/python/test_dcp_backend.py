"""baton under torch.distributed.checkpoint (python/baton/dcp): dcp.save,
dcp.async_save and dcp.load with BatonWriter/BatonReader write and read
baton versions (tests/python/run-pytest: every rank runs these in order,
over one gloo process group)."""
import gc
import glob
import json
import os
import re
import subprocess
import sys
import traceback

import pytest

torch = pytest.importorskip("torch")
dcp = pytest.importorskip("torch.distributed.checkpoint")

import conftest  # noqa: E402  (tests/python/conftest.py: the launcher's rank and size)
import gloo_world  # noqa: E402  (tests/python/, on pytest's rootdir path)

from baton import _baton  # noqa: E402
from baton.dcp import BatonReader, BatonWriter  # noqa: E402

BATON_CLI = os.path.join(os.environ.get("BATON_BUILD_DIR", ""), "cli", "baton")


@pytest.fixture(scope="module")
def dist():
    d = gloo_world.world(conftest.RANK, conftest.SIZE, "test_dcp_backend")
    yield d
    gloo_world.close()


def _state(seed):
    g = torch.Generator().manual_seed(seed)
    return {
        "model": {
            "w": torch.randn(7, 5, generator=g),
            "b16": torch.randn(4, 3, generator=g).to(torch.bfloat16),
            "scalar": torch.tensor(float(seed)),
            "ids": torch.arange(9, dtype=torch.int64) * seed,
        },
        "extra": {"epoch": seed, "name": "run-%d" % seed},  # not a tensor: DCP writes it as bytes
    }


def _zeros_like(sd):
    if isinstance(sd, dict):
        return {k: _zeros_like(v) for k, v in sd.items()}
    if isinstance(sd, torch.Tensor):
        return torch.zeros_like(sd)
    return None


def _assert_equal(got, want):
    assert got.keys() == want.keys()
    for k in want:
        if isinstance(want[k], dict):
            _assert_equal(got[k], want[k])
        elif isinstance(want[k], torch.Tensor):
            assert got[k].dtype == want[k].dtype and torch.equal(got[k], want[k]), k
        else:
            assert got[k] == want[k], k


def _manifest(path):
    with open(os.path.join(path, "manifest.json")) as f:
        return json.load(f)


def _versions(d):
    return sorted(p for p in glob.glob(os.path.join(d, "v*-s*")) if os.path.exists(os.path.join(p, "manifest.json")))


def test_save_load_round_trip(dist, rt, shared_dir, rank):
    """Every entry comes back exactly; each replicated entry is one array written by one rank; the CLI reads it."""
    sd = _state(3)
    writer = BatonWriter(shared_dir, step=5, runtime=rt)
    dcp.save(sd, storage_writer=writer)
    assert writer.last_step == 5
    got = _zeros_like(sd)
    reader = BatonReader(shared_dir, runtime=rt)
    dcp.load(got, storage_reader=reader)
    _assert_equal(got, sd)
    assert reader.last_restore["step"] == 5 and reader.last_restore["fallbacks"] == []
    (version,) = _versions(shared_dir)
    arrays = {a["name"]: a for a in _manifest(version)["arrays"]}
    # One format (issue 46): each tensor is the array baton.Checkpointer names the same leaf by; the values are
    # JSON in the tree beside the marker, no array of their own, and no pickled DCP Metadata.
    assert arrays["model:w"]["shape"] == [7, 5] and arrays["model:w"]["dtype"] == "f32"
    assert arrays["model:b16"]["dtype"] == "bf16"
    assert arrays["model:scalar"]["shape"] == [1]
    assert set(arrays) == {"model:w", "model:b16", "model:ids", "model:scalar", "~baton.state_dict"}, sorted(arrays)
    if rank == 0 and os.path.exists(BATON_CLI):
        outs = {}
        for cmd in ("ls", "verify", "inspect"):
            out = subprocess.run([BATON_CLI, "ckpt", cmd, shared_dir], capture_output=True, text=True, timeout=120)
            assert out.returncode == 0, (cmd, out.stdout, out.stderr)
            outs[cmd] = out.stdout
        assert "model:w" in outs["inspect"] and "dcp-metadata" not in outs["inspect"], outs["inspect"]
        # Whole tensors by their state-dict paths, beside the arrays (issue 46: inspect showed boxes only).
        assert re.search(r"\nmodel\.w +float32 +\[7, 5\] +model:w\n", outs["inspect"]), outs["inspect"]
        got = json.loads(subprocess.run([BATON_CLI, "ckpt", "inspect", shared_dir, "--json"], capture_output=True,
                                        text=True, timeout=120, check=True).stdout)
        assert {"path": "model.w", "dtype": "float32", "shape": [7, 5], "arrays": ["model:w"]} in got["tensors"]


def test_a_load_opens_the_directory_once_and_a_second_load_with_the_same_reader_works(dist, rt, shared_dir,
                                                                                        monkeypatch):
    """Issue 48 item 4 (fixed costs): a dcp.load opened a checkpointer for read_metadata and another for
    read_data (each open collective); now read_data reads through the one read_metadata opened, and closes it."""
    opened = []
    real_open = BatonReader._open

    def counting_open(self):
        ck = real_open(self)
        opened.append(ck)
        return ck

    monkeypatch.setattr(BatonReader, "_open", counting_open)
    sd = _state(8)
    dcp.save(sd, storage_writer=BatonWriter(shared_dir, step=1, runtime=rt))
    reader = BatonReader(shared_dir, runtime=rt)
    for _ in range(2):
        got = _zeros_like(sd)
        dcp.load(got, storage_reader=reader)
        _assert_equal(got, sd)
    assert len(opened) == 2 and all(ck.closed for ck in opened), [ck.closed for ck in opened]


def test_without_runtime_the_writer_and_reader_use_the_programs_runtime(dist, rt, shared_dir, monkeypatch):
    """Issue 46 item 11: before, a BatonWriter or BatonReader given no runtime= made a second Runtime beside the
    program's (its own communicators, heartbeat thread and excepthook)."""
    def second_runtime(*args, **kwargs):
        raise AssertionError("a second baton.Runtime was made")

    assert _baton._process_runtime() is rt
    sd = _state(6)
    monkeypatch.setattr(_baton, "Runtime", second_runtime)
    dcp.save(sd, storage_writer=BatonWriter(shared_dir, step=1))
    got = _zeros_like(sd)
    dcp.load(got, storage_reader=BatonReader(shared_dir))
    _assert_equal(got, sd)


def test_bytes_entries_agree_in_one_collective(dist, rt, shared_dir, monkeypatch):
    """A save gathers every rank's non-tensor values (the tree's JSON) in one
    all-gather, on the checkpointer's own communicator (not the Runtime's
    world: under dcp.async_save it runs on DCP's thread), and registers each
    tensor with its global shape: no per-entry agreement (one all-reduce
    each, the fixed cost of a small save that docs/benchmarks.md counts)."""
    gathers, runtime_gathers, unshaped = [], [], []
    real_gather, real_ck = _baton._allgather_bytes, _baton.ArrayCheckpointer

    def counting_gather(runtime, data, what, **kw):
        runtime_gathers.append(what)
        return real_gather(runtime, data, what, **kw)

    class Recording:
        def __init__(self, *a, **kw):
            self._ck = real_ck(*a, **kw)

        def register_sharded(self, name, array, offset, global_shape=None, **kw):
            if global_shape is None:
                unshaped.append(name)
            return self._ck.register_sharded(name, array, offset=offset, global_shape=global_shape, **kw)

        def _allgather_bytes(self, data, what, **kw):
            gathers.append(what)
            return self._ck._allgather_bytes(data, what, **kw)

        def __getattr__(self, attr):
            return getattr(self._ck, attr)

        def __setattr__(self, attr, value):  # user_blob
            if attr == "_ck":
                object.__setattr__(self, attr, value)
            else:
                setattr(self._ck, attr, value)

    monkeypatch.setattr(_baton, "_allgather_bytes", counting_gather)
    monkeypatch.setattr(_baton, "ArrayCheckpointer", Recording)
    sd = _state(4)
    dcp.save(sd, storage_writer=BatonWriter(shared_dir, step=1, runtime=rt))
    monkeypatch.undo()
    assert gathers == ["BatonWriter: the state's non-tensor values"] and runtime_gathers == []
    assert unshaped == []
    got = _zeros_like(sd)
    dcp.load(got, storage_reader=BatonReader(shared_dir, runtime=rt))
    _assert_equal(got, sd)


def test_dtensor_saved_by_shard_loaded_other_layout(dist, rt, shared_dir, size):
    """A DTensor saved as Shard(0) is written one local shard per rank and loads into Shard(1) and Replicate()."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (size,))
    full = torch.arange(6 * size * 4, dtype=torch.float32).reshape(6 * size, 4)
    sd = {"t": distribute_tensor(full, mesh, [Shard(0)])}
    dcp.save(sd, storage_writer=BatonWriter(shared_dir, step=1, runtime=rt))
    (version,) = _versions(shared_dir)
    arrays = [a for a in _manifest(version)["arrays"] if a["name"].startswith("t~@")]
    assert sorted(a["name"] for a in arrays) == sorted("t~@%d,0" % (6 * r) for r in range(size))
    for placement in (Shard(1), Replicate()):
        target = {"t": distribute_tensor(torch.zeros_like(full), mesh, [placement])}
        dcp.load(target, storage_reader=BatonReader(shared_dir, runtime=rt))
        assert torch.equal(target["t"].full_tensor(), full), placement


def test_async_save(dist, rt, shared_dir):
    """dcp.async_save with a BatonWriter commits a version once its future completes; later changes do not reach it."""
    sd = _state(4)
    want = {"model": {k: v.clone() for k, v in sd["model"].items()}, "extra": dict(sd["extra"])}
    future = dcp.async_save(sd, storage_writer=BatonWriter(shared_dir, step=9, runtime=rt))
    sd["model"]["w"].add_(1)  # at once: DCP's stager copied the state before async_save returned
    future.result(timeout=120)
    got = _zeros_like(want)
    dcp.load(got, storage_reader=BatonReader(shared_dir, runtime=rt))
    _assert_equal(got, want)
    # The writer's stage and chunk registrations and the reader's calls pause the cyclic collector
    # (baton/gc_pause.py), never past them: on after the save (its write on DCP's thread) and the load.
    assert gc.isenabled()


def _staged_pointers():
    """The process's kept staging buffers (baton.dcp.staging), by their place in the state."""
    from baton.dcp import open_checkpointers
    return {path: t.data_ptr() for path, t in open_checkpointers.staging()._kept.items() if t.numel()}


def test_async_saves_stage_into_the_buffers_kept_from_the_last_one(dist, rt, shared_dir):
    """The next dcp.async_save of the same layout copies into the staged memory of the one before (a load in
    between too, which closes the writer's checkpointer; a save into another directory too); each version holds
    the state of its own call; BatonWriter.close() frees the memory; cache_staged_state_dict=False keeps none."""
    sd = _state(5)
    want = []
    for step in (1, 2, 3):
        want.append({"model": {k: v.clone() for k, v in sd["model"].items()}, "extra": dict(sd["extra"])})
        writer = BatonWriter(shared_dir, step=step, runtime=rt)  # a writer per save, as programs often make
        future = dcp.async_save(sd, storage_writer=writer)
        sd["model"]["w"].add_(1)  # at once, while the save of the staged copy is in flight
        sd["model"]["ids"].mul_(2)
        future.result(timeout=120)
        if step == 1:
            kept = _staged_pointers()
            assert len(kept) == 4, kept  # the state's four tensors
        else:
            assert _staged_pointers() == kept
        got = _zeros_like(want[-1])
        dcp.load(got, storage_reader=BatonReader(shared_dir, runtime=rt))
        _assert_equal(got, want[-1])
    for step, state in ((1, want[0]), (2, want[1])):
        got = _zeros_like(state)
        dcp.load(got, storage_reader=BatonReader(shared_dir, step=step, runtime=rt))
        _assert_equal(got, state)
    other = shared_dir.rstrip("/") + "-other"  # beside it: a baton directory holds versions only
    dcp.async_save(sd, storage_writer=BatonWriter(other, step=1, runtime=rt)).result(timeout=120)
    assert _staged_pointers() == kept  # one copy per process, whichever directory it saves into
    got = _zeros_like(want[0])
    dcp.load(got, storage_reader=BatonReader(other, runtime=rt))
    _assert_equal(got["model"], sd["model"])
    BatonWriter(other).close()  # the directory's checkpointer, and the process's staged copy with it
    writer.close()
    assert _staged_pointers() == {}
    writer = BatonWriter(shared_dir, step=4, runtime=rt, cache_staged_state_dict=False)
    dcp.async_save(sd, storage_writer=writer).result(timeout=120)
    assert _staged_pointers() == {}
    got = _zeros_like(want[0])
    dcp.load(got, storage_reader=BatonReader(shared_dir, runtime=rt))
    _assert_equal(got["model"], sd["model"])
    writer.close()


def test_an_async_save_of_a_dtensor_stages_its_local_shard_with_its_layout(dist, rt, shared_dir, size):
    """A DTensor staged for dcp.async_save keeps its mesh and placements (one array per rank's shard, as
    dcp.save writes it) over a copy of its local shard; a second save copies into the same memory."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (size,))
    full = torch.arange(6 * size * 4, dtype=torch.float32).reshape(6 * size, 4)
    sd = {"t": distribute_tensor(full, mesh, [Shard(0)])}
    for step in (1, 2):
        future = dcp.async_save(sd, storage_writer=BatonWriter(shared_dir, step=step, runtime=rt))
        sd["t"].to_local().add_(1000)  # this rank's shard, changed at once: the version holds the staged copy
        future.result(timeout=120)
        if step == 1:
            kept = _staged_pointers()
            assert list(kept) == [("t",)], kept
        assert _staged_pointers() == kept
        version = _versions(shared_dir)[-1]
        arrays = [a for a in _manifest(version)["arrays"] if a["name"].startswith("t~@")]
        assert sorted(a["name"] for a in arrays) == sorted("t~@%d,0" % (6 * r) for r in range(size))
        target = {"t": distribute_tensor(torch.zeros_like(full), mesh, [Shard(0)])}
        dcp.load(target, storage_reader=BatonReader(shared_dir, runtime=rt))
        assert torch.equal(target["t"].full_tensor(), full + 1000 * (step - 1)), step
    BatonWriter(shared_dir).close()


def test_without_init_process_group_save_and_load_say_to_call_it(dist, rt, shared_dir, monkeypatch, size):
    """Issue 46 defect 14: over several ranks, dcp.save/dcp.load without torch.distributed initialized failed
    as "rows overlap" or "the ranks registered different arrays"; now every rank is told to call
    baton.init_process_group first, naming the writer or reader that needed it."""
    sd = _state(7)
    dcp.save(sd, storage_writer=BatonWriter(shared_dir, step=1, runtime=rt))
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: False)  # as a program that never called it
    if size == 1:  # one process needs no process group: DCP saves and loads alone
        dcp.save(sd, storage_writer=BatonWriter(shared_dir, step=2, runtime=rt))
        got = _zeros_like(sd)
        dcp.load(got, storage_reader=BatonReader(shared_dir, runtime=rt))
        _assert_equal(got, sd)
        return
    for what, call in (("BatonWriter", lambda: dcp.save(sd, storage_writer=BatonWriter(shared_dir, step=2,
                                                                                        runtime=rt))),
                       ("BatonReader", lambda: dcp.load(_zeros_like(sd),
                                                        storage_reader=BatonReader(shared_dir, runtime=rt)))):
        with pytest.raises(BaseException) as e:
            call()
        text = str(e.value)
        assert what in text and "torch.distributed is not initialized" in text, text
        assert "call baton.init_process_group(runtime) (or torch.distributed.init_process_group) first" in text, text
    assert [os.path.basename(v).split("-")[1] for v in _versions(shared_dir)] == ["s1"]


def test_steps_retention_and_step_choice(dist, rt, shared_dir):
    """Without step= each save is the next step; keep=2 keeps two versions; step= loads an older one."""
    for seed in (1, 2, 3):
        dcp.save(_state(seed), storage_writer=BatonWriter(shared_dir, keep=2, runtime=rt))
    assert [os.path.basename(v).split("-s")[1] for v in _versions(shared_dir)] == ["1", "2"]
    got = _zeros_like(_state(0))
    dcp.load(got, storage_reader=BatonReader(shared_dir, step=1, runtime=rt))
    _assert_equal(got, _state(2))


def _flip_data_byte(version, array):
    """Flips one byte of `array`'s data in its shard file (found through the shard indexes)."""
    for index in glob.glob(os.path.join(version, "shard-*.json")):
        with open(index) as f:
            shard = json.load(f)
        for ds in shard["datasets"]:
            if ds["array"] == array:
                path = os.path.join(version, shard["file"])
                with open(path, "r+b") as f:
                    f.seek(ds["offset"] + 3)
                    b = f.read(1)
                    f.seek(ds["offset"] + 3)
                    f.write(bytes([b[0] ^ 0x40]))
                return path
    raise AssertionError("no dataset of %s in %s" % (array, version))


def test_flipped_byte_falls_back(dist, rt, shared_dir, rank):
    """A flipped byte in the newest version's data: the load restores the older version, and says so."""
    dcp.save(_state(1), storage_writer=BatonWriter(shared_dir, step=1, runtime=rt))
    dcp.save(_state(1), storage_writer=BatonWriter(shared_dir, step=2, runtime=rt))
    newest = _versions(shared_dir)[-1]
    dist.barrier()
    if rank == 0:
        _flip_data_byte(newest, "model:w")
    dist.barrier()
    got = _zeros_like(_state(0))
    reader = BatonReader(shared_dir, runtime=rt)
    dcp.load(got, storage_reader=reader)
    _assert_equal(got, _state(1))
    assert reader.last_restore["step"] == 1
    assert [f["step"] for f in reader.last_restore["fallbacks"]] == [2]


def test_empty_directory_names_it(dist, rt, shared_dir):
    """A load from a directory with no version fails on every rank naming the directory."""
    with pytest.raises(dcp.api.CheckpointException) as info:
        dcp.load(_zeros_like(_state(0)), storage_reader=BatonReader(shared_dir, runtime=rt))
    # DCP gathers every rank's failure into one exception on every rank.
    text = "".join(traceback.format_exception(info.value))
    assert "BatonReader: %s holds no checkpoint version" % shared_dir in text, text


_CONVERT = r"""
import sys, torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemWriter
from baton.dcp.__main__ import main
d = sys.argv[1]
sd = {"a": torch.arange(10.0), "b": {"c": torch.ones(3, 4, dtype=torch.bfloat16), "n": 7}}
dcp.save(sd, storage_writer=FileSystemWriter(d + "/dcp-in"), no_dist=True)
torch.save({"w": torch.full((2, 2), 5.0)}, d + "/in.pt")
rcs = [main(["import", d + "/dcp-in", d + "/baton"]), main(["import", d + "/in.pt", d + "/baton", "--step", "7"]),
       main(["export", d + "/baton", d + "/dcp-out", "--step", "0"]),
       main(["export", d + "/baton", d + "/out.pt", "--format", "torch"]),
       main(["import", d + "/baton", d + "/other"])]
assert rcs == [0, 0, 0, 0, 2], rcs  # the last: bad input (a baton directory as SOURCE)
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
dcp_to_torch_save(d + "/dcp-out", d + "/round.pt")
back = torch.load(d + "/round.pt")
assert torch.equal(back["a"], sd["a"]) and torch.equal(back["b"]["c"], sd["b"]["c"]) and back["b"]["n"] == 7, back
assert torch.equal(torch.load(d + "/out.pt")["w"], torch.full((2, 2), 5.0))
print("convert ok")
"""


def test_import_export_tool(dist, shared_dir, rank):
    """python -m baton.dcp (its main): a DCP directory and a torch.save file become baton versions that
    `baton ckpt verify` accepts, and come back out as DCP's format and a torch.save file, equal; a source that is
    neither is refused naming it. Rank 0 runs it as a process of its own (a world of one); the others wait."""
    if rank == 0:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_"))}
        out = subprocess.run([sys.executable, "-c", _CONVERT, shared_dir], capture_output=True, text=True,
                             timeout=280, env=env)
        assert out.returncode == 0 and "convert ok" in out.stdout, (out.stdout, out.stderr[-3000:])
        assert "without .metadata: not a DCP checkpoint" in out.stderr, out.stderr[-3000:]
        if os.path.exists(BATON_CLI):
            v = subprocess.run([BATON_CLI, "ckpt", "verify", os.path.join(shared_dir, "baton")], capture_output=True,
                               text=True, timeout=120)
            assert v.returncode == 0, (v.stdout, v.stderr)
    dist.barrier()


_RESUME_THROUGH_A_READER = r"""
import json, os, sys
import torch
import torch.distributed.checkpoint as dcp
import baton
from baton.dcp import BatonReader, BatonWriter
d, launch = sys.argv[1], sys.argv[2]
rt = baton.Runtime()
sd = {"w": torch.zeros(4)}
if launch == "resume":  # as examples/train_fsdp.py does: dcp.load through a reader, then saves through a writer
    reader = BatonReader(d, runtime=rt)
    dcp.load(sd, storage_reader=reader)
    assert torch.equal(sd["w"], torch.full((4,), 3.0)), sd
    print("resumed from", reader.last_restore["step"], flush=True)
else:
    sd["w"].fill_(3.0)
dcp.save(sd, storage_writer=BatonWriter(d, runtime=rt))
rt.close()
"""


def test_a_restore_through_a_reader_is_in_the_jobs_event_log(rank, shared_dir):
    """Before: a BatonReader opens read-only and its restore wrote no record, so `baton report` said nothing of
    where the FSDP2 example resumed. Now the record waits in the process's log buffer and reaches the job's log
    when the program's BatonWriter opens it; the reader itself still writes no file. One process per launch (a
    world of one, rank 0 here), two launches of job 4243 (the second resumes)."""
    if rank != 0:
        return
    d = os.path.join(shared_dir, "events-resume")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_", "OPAL_"))}
    env.update(SLURM_JOB_ID="4243", SLURM_PROCID="0")
    env.pop("BATON_EVENTS", None)
    for launch in ("first", "resume"):
        p = subprocess.run([sys.executable, "-c", _RESUME_THROUGH_A_READER, d, launch], env=env, capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0, (launch, p.stdout, p.stderr[-3000:])
    assert "resumed from 0" in p.stdout, p.stdout
    records = [json.loads(line) for line in open(os.path.join(d, "events", "4243-r0.jsonl"))]
    starts = [i for i, r in enumerate(records) if r["ev"] == "start"]
    assert len(starts) == 2, records
    second = [r for r in records[starts[1]:] if r["ev"] in ("restore", "save")]
    restores = [r for r in second if r["ev"] == "restore"]
    assert restores and all(r["ok"] for r in restores), second
    assert restores[-1]["step"] == 0, second
    saves = [r for r in second if r["ev"] == "save"]
    assert saves and saves[0]["step"] == 1 and second.index(saves[0]) > second.index(restores[-1]), second
    first = [r["ev"] for r in records[:starts[1]]]
    assert "restore" not in first, first  # the first launch found nothing to restore and read nothing


def test_level2_where_asked(dist, rt, shared_dir):
    """level2=True with a node-local directory: the save is kept there too and the load is served from it."""
    shared, local = os.path.join(shared_dir, "shared"), os.path.join(shared_dir, "local")
    sd = _state(6)
    dcp.save(sd, storage_writer=BatonWriter(shared, step=1, runtime=rt, level2=True, local_dir=local))
    got = _zeros_like(sd)
    reader = BatonReader(shared, runtime=rt, level2=True, local_dir=local)
    dcp.load(got, storage_reader=reader)
    _assert_equal(got, sd)
    assert reader.last_restore["level"] == 2 and reader.last_restore["step"] == 1, reader.last_restore
    assert _versions(shared) and os.listdir(local)


PROCESS_SAVE = """
import os, sys, time, torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import _async_process_executor
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions
from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType
import baton
from baton.dcp import BatonReader, BatonWriter


def versions(ck):
    return sorted(n for n in os.listdir(ck) if n.startswith("v")) if os.path.isdir(ck) else []


def main(d):
    rt = baton.Runtime()
    # Each rank its own file: two ranks' lines on one pipe can interleave in the middle of a line.
    out = open(os.path.join(d, "out%d" % rt.rank), "w", buffering=1)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(d, "store"), rank=rt.rank,
                            world_size=rt.size)
    ck = os.path.join(d, "ck")
    # No runtime= (the issue's case): the writer would have made a Runtime of its own in DCP's process.
    writer = BatonWriter(ck)
    try:
        fut = dcp.async_save({"w": torch.ones(4)}, storage_writer=writer,
                             async_checkpointer_type=AsyncCheckpointerType.PROCESS)
        print(f"rank {rt.rank}: not refused at the call", file=out, flush=True)
        fut.result(timeout=120)
    except Exception as e:
        print(f"rank {rt.rank}: refused:", type(e).__name__, e, file=out, flush=True)
    exists, spawned = os.path.exists(ck), _async_process_executor._CHECKPOINT_PROCESS is not None
    dist.barrier()  # before the next save opens the directory on any rank
    print(f"rank {rt.rank}: after the refusal: directory {exists}, process {spawned}", file=out, flush=True)
    # The same writer and directory serve the next saves: a THREAD async_save, then a dcp.save.
    dcp.async_save({"w": torch.full((4,), 2.0)}, storage_writer=writer).result(timeout=120)
    dcp.save({"w": torch.full((4,), 3.0)}, storage_writer=writer)
    got = {"w": torch.zeros(4)}
    dcp.load(got, storage_reader=BatonReader(ck))
    print(f"rank {rt.rank}: versions after:", versions(ck), "w", got["w"].tolist(), file=out, flush=True)
    # The backstop: with a stager of the program's, DCP never calls the writer on this thread before it sends the
    # writer to its process; the pickling refuses it there, and the save's future raises.
    fut = dcp.async_save({"w": torch.ones(4)}, storage_writer=writer,
                         async_checkpointer_type=AsyncCheckpointerType.PROCESS,
                         async_stager=DefaultStager(StagingOptions(False, False, False, False)))
    try:
        fut.result(timeout=120)
        print(f"rank {rt.rank}: backstop saved?", file=out, flush=True)
    except Exception as e:
        print(f"rank {rt.rank}: backstop refused:", type(e).__name__, file=out, flush=True)
    print(f"rank {rt.rank}: versions at the end:", versions(ck), file=out, flush=True)
    writer.close()
    dist.destroy_process_group()
    out.close()


if __name__ == "__main__":  # DCP's process is spawned: it imports this file again, as multiprocessing does
    main(sys.argv[1])
"""


def test_an_async_save_in_another_process_is_refused_at_the_call_naming_thread(tmp_path):
    """Issue 46 item 10: before, DCP's process made a Runtime of its own and could not start MPI, and the ranks
    then waited 60 s in MPI_Finalize and exited 75 (a requeue of a finished program); then the refusal came
    through the save's future only, after DCP had spawned its process. dcp.async_save itself raises on every
    rank, nothing is written or spawned, the same writer then saves (THREAD, dcp.save), and the processes exit 0.
    A 2-rank job of its own."""
    import time
    if conftest.SIZE > 1:
        pytest.skip("starts a 2-rank job of its own: runs in the np1 launch")
    script = tmp_path / "process_save.py"
    script.write_text(PROCESS_SAVE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_", "OPAL_"))}
    env["BATON_COLLECTIVE_TIMEOUT"] = "60"
    mpirun_ranks = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib", "mpirun-ranks")
    t0 = time.monotonic()
    p = subprocess.run(["timeout", "-k", "5", "150", mpirun_ranks, "2", sys.executable, str(script), str(tmp_path)],
                       env=env, capture_output=True, text=True, timeout=180)
    took = time.monotonic() - t0
    said = "".join((tmp_path / ("out%d" % r)).read_text() for r in (0, 1) if (tmp_path / ("out%d" % r)).exists())
    out = said + p.stdout + p.stderr
    assert p.returncode == 0, f"exit {p.returncode} after {took:.0f} s\n{out[-4000:]}"
    lines = said.splitlines()
    for rank in (0, 1):
        assert f"rank {rank}: not refused at the call" not in said, out[-4000:]
        refused = [ln for ln in lines if ln.startswith(f"rank {rank}: refused: InvalidArgument")]
        assert refused and "AsyncCheckpointerType.THREAD" in refused[0], out[-4000:]
        assert f"rank {rank}: after the refusal: directory False, process False" in said, out[-4000:]
        after = [ln for ln in lines if ln.startswith(f"rank {rank}: versions after:")]
        m = re.search(r"versions after: (\[.*\]) w \[3\.0, 3\.0, 3\.0, 3\.0\]$", after[0] if after else "")
        assert m and re.fullmatch(r"\['v[^']*-s0', 'v[^']*-s1'\]", m.group(1)), out[-4000:]
        assert f"rank {rank}: backstop refused: InvalidArgument" in said, out[-4000:]
        assert f"rank {rank}: versions at the end: {m.group(1)}" in said, out[-4000:]
    assert took < 60, f"{took:.0f} s: a wait in MPI_Finalize?"


def test_every_dtype_dcp_saves_round_trips(dist, rt, shared_dir):
    """float8 (e4m3fn, e5m2 and the fnuz/e8m0 variants baton has no dtype for) and complex64/128, 0-d included:
    dcp.save with BatonWriter and dcp.load with BatonReader give the same bits (defect 8: BatonWriter refused
    float8 and complex64)."""
    g = torch.Generator().manual_seed(8)
    base = torch.randn(6, 4, generator=g)
    sd = {"e4m3": base.to(torch.float8_e4m3fn), "e5m2": base.to(torch.float8_e5m2),
          "c64": torch.complex(base, -base), "c128": torch.complex(base, base * 2).to(torch.complex128),
          "c0": torch.tensor(1 + 2j, dtype=torch.complex64), "f32": base}
    for name in ("float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"):
        if hasattr(torch, name):
            sd[name] = base.abs().to(getattr(torch, name))
    dcp.save(sd, storage_writer=BatonWriter(shared_dir, runtime=rt))
    got = {k: torch.zeros_like(v) for k, v in sd.items()}
    reader = BatonReader(shared_dir, runtime=rt)
    dcp.load(got, storage_reader=reader)
    for k, v in sd.items():
        assert got[k].dtype == v.dtype and torch.equal(got[k].view(-1).view(torch.uint8), v.view(-1).view(torch.uint8)), k
    # Read into the targets themselves, through views of their memory in the stored form (baton.dcp.read_targets).
    assert reader.scratch_bytes == 0, reader.scratch_bytes


def _vm(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError("/proc/self/status has no " + field)


def test_a_load_reads_into_the_targets_themselves(dist, rt, shared_dir):
    """Issue 48: the rows go straight into DCP's targets (planner.resolve_tensor), every byte verified on every
    rank before any is written (verify_before_write): no state-sized scratch copy. Before, a load read the whole
    state into scratch and copied it in: the peak memory of this 32 MiB load rose by more than 32 MiB."""
    n = 8 << 20  # 32 MiB of float32, 16 chunks of 2 MiB
    sd = {"w": torch.arange(n, dtype=torch.float32), "m": {"b": torch.arange(12.0).reshape(4, 3)},
          "step": torch.tensor(7.0)}
    dcp.save(sd, storage_writer=BatonWriter(shared_dir, runtime=rt))
    target = {"w": torch.full((n,), 2.0), "m": {"b": torch.zeros(4, 3)}, "step": torch.tensor(0.0)}
    where = {"w": target["w"].data_ptr(), "b": target["m"]["b"].data_ptr()}
    reader = BatonReader(shared_dir, runtime=rt)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    before = _vm("VmRSS")
    dcp.load(target, storage_reader=reader)
    rise = _vm("VmHWM") - before
    _assert_equal(target, sd)
    assert {"w": target["w"].data_ptr(), "b": target["m"]["b"].data_ptr()} == where
    assert reader.scratch_bytes == 0, reader.scratch_bytes
    # The extension's own buffers (a 2 MiB chunk buffer, 512 KiB pieces) and DCP's plan, not the state's 32 MiB.
    assert rise < 12 << 20, "peak memory rose by %.1f MiB" % (rise / 2**20)


def test_a_target_that_cannot_take_the_rows_is_read_through_scratch(dist, rt, shared_dir):
    """A target that is not one contiguous block of the stored rows (a transposed tensor) or not of the stored
    dtype (DCP's copy_ converts) is read into scratch and copied in once verified; the others directly."""
    sd = {"t": torch.arange(12.0).reshape(3, 4), "d": torch.arange(6, dtype=torch.float64),
          "plain": torch.arange(5, dtype=torch.int32)}
    dcp.save(sd, storage_writer=BatonWriter(shared_dir, runtime=rt))
    target = {"t": torch.zeros(4, 3).t(), "d": torch.zeros(6, dtype=torch.float32), "plain": torch.zeros(5, dtype=torch.int32)}
    reader = BatonReader(shared_dir, runtime=rt)
    dcp.load(target, storage_reader=reader)
    assert torch.equal(target["t"], sd["t"]) and not target["t"].is_contiguous()
    assert target["d"].dtype == torch.float32 and torch.equal(target["d"], sd["d"].float())
    assert torch.equal(target["plain"], sd["plain"])
    assert reader.scratch_bytes == 12 * 4 + 6 * 8, reader.scratch_bytes


def test_a_rank_that_cannot_plan_its_reads_fails_every_rank_before_anything_is_read(dist, rt, shared_dir, rank, size):
    """A planner whose resolve_tensor raises on the last rank only: the ranks agree on it before the collective
    restore (no rank waits in it for the one that raised), every rank fails naming the failure, and the
    targets hold what they held."""
    import time
    from torch.distributed.checkpoint import DefaultLoadPlanner

    class Refusing(DefaultLoadPlanner):
        def resolve_tensor(self, read_item):
            if rank == size - 1:
                raise RuntimeError("resolve_tensor refused on rank %d" % rank)
            return super().resolve_tensor(read_item)

    dcp.save({"w": torch.arange(10.0)}, storage_writer=BatonWriter(shared_dir, runtime=rt))
    target = {"w": torch.full((10,), 2.0)}
    t0 = time.monotonic()
    with pytest.raises(BaseException) as info:
        dcp.load(target, storage_reader=BatonReader(shared_dir, runtime=rt), planner=Refusing())
    took = time.monotonic() - t0
    assert "resolve_tensor refused on rank %d" % (size - 1) in _text_of(info.value), _text_of(info.value)
    assert took < 30, "%.0f s: a rank waited in the restore for the one that raised" % took
    assert torch.equal(target["w"], torch.full((10,), 2.0))


def _text_of(e):
    return "".join(traceback.format_exception(e))
