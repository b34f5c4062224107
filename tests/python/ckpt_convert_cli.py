"""`baton ckpt import|export` (cli/ckpt_convert_command.cc, which runs
python -m baton.dcp): the real command on a DCP directory written by
dcp.save (FileSystemWriter) and on a torch.save file, `baton ckpt
verify|ls|inspect` on the versions it writes, and an export back to DCP's
format and to torch.save that loads equal to the original exactly; bad
input exits 2 naming the value with nothing written.

Run by tests/python/ckpt-convert.sh in one pytest process (not under
mpirun: each command is a process of its own, a world of one); the rows go
where conftest.py writes them. The command is started 5 times for the
shared versions (about 2.5 s each: Python and torch start), so the module
builds them once.
"""
import collections
import json
import os
import shutil
import subprocess

import pytest

torch = pytest.importorskip("torch")
dcp = pytest.importorskip("torch.distributed.checkpoint")
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter  # noqa: E402
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save  # noqa: E402

BUILD = os.environ.get("BATON_BUILD_DIR", "")
BATON = os.path.join(BUILD, "cli", "baton")
HERE = os.path.dirname(os.path.abspath(__file__))


def baton(*args, env=None, timeout=120, cwd=None):
    """(exit status, stdout, stderr) of the real `baton ckpt ARGS`, outside any MPI job."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_", "OPAL_"))}
    e.update(env or {})
    p = subprocess.run([BATON, "ckpt"] + [str(a) for a in args], capture_output=True, text=True, env=e,
                       timeout=timeout, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def ok(*args, cwd=None):
    rc, out, err = baton(*args, cwd=cwd)
    assert rc == 0, (args, rc, out, err)
    return out


def same(a, b, where="root"):
    """a and b are the same object tree: types, key order and key types, attributes, tensor dtypes and bytes."""
    assert type(a) is type(b), (where, type(a), type(b))
    if isinstance(a, torch.Tensor):
        assert (a.dtype, a.shape) == (b.dtype, b.shape) and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert list(a.keys()) == list(b.keys()), (where, list(a.keys()), list(b.keys()))
        assert vars(a) == vars(b) if hasattr(a, "__dict__") else True, where
        for k in a:
            same(a[k], b[k], "%s/%r" % (where, k))
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, "%s/%d" % (where, i))
    else:
        assert a == b, (where, a, b)


def _dcp_state():
    torch.manual_seed(1)
    return {"model": {"layer": {"w": torch.randn(5, 3), "b": torch.arange(4, dtype=torch.int64)},
                      "half": torch.randn(2, 8).to(torch.bfloat16)},
            "scale": torch.tensor(0.25), "step": 12, "tag": "run-7", "lrs": [0.1, 0.01]}


def _torch_save_object():
    """What a training script torch.saves: a module's state dict (an OrderedDict with _metadata), Adam's state
    (int parameter keys), an empty dict, a tuple holding a tensor, a list, strings, bf16, values JSON cannot hold
    (a torch.Size, a torch.dtype)."""
    torch.manual_seed(2)
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    opt = torch.optim.Adam(m.parameters(), lr=0.01)
    m(torch.randn(2, 3)).sum().backward()
    opt.step()
    return {"model": m.state_dict(), "optimizer": opt.state_dict(), "epoch": 3, "empty": {},
            "pair": (1, torch.arange(3)), "lst": [torch.ones(2), 3, "x"], "bf": torch.ones(2, 2, dtype=torch.bfloat16),
            "od": collections.OrderedDict([(2, "b"), (1, "a")]), "size": torch.Size([2, 3]), "kind": torch.bfloat16}


def _tree(path, baton_dir):
    """Every path under `path` with its size and mtime: what "nothing written" compares, the baton directory's
    writer.lock included (bad input is refused before import's Checkpointer opens DIR and takes it; an export
    takes no lock). Its event log is compared: no command of `baton ckpt` is a launch of the job, so none
    writes there."""
    out = {}
    for root, dirs, files in os.walk(path):
        for n in dirs + files:
            p = os.path.join(root, n)
            st = os.lstat(p)
            out[p] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """Imports into one baton directory: the DCP directory (step 0), the torch.save file (--step 9), the DCP
    directory again with --keep 2 (step 10: step 0 goes); exports step 9 as torch.save and the newest as DCP."""
    d = tmp_path_factory.mktemp("convert")
    sd = _dcp_state()
    dcp.save(sd, storage_writer=FileSystemWriter(str(d / "dcp-in")), no_dist=True)
    obj = _torch_save_object()
    torch.save(obj, str(d / "in.pt"))
    b = d / "baton"
    # One import from a directory holding a numpy.py and a torch.py, with relative paths: the converter
    # imports neither (the working directory is not on its sys.path).
    shadow = d / "shadow"
    shadow.mkdir()
    for name in ("numpy.py", "torch.py"):
        (shadow / name).write_text("raise SystemExit('imported %s from the working directory')\n" % name)
    outs = [ok("import", d / "dcp-in", b), ok("import", "../in.pt", "../baton", "--step", "9", cwd=shadow),
            ok("import", d / "dcp-in", b, "--keep", "2"),
            ok("export", b, d / "out.pt", "--step", "9", "--format", "torch"), ok("export", b, d / "dcp-out")]
    return {"dir": d, "baton": b, "sd": sd, "obj": obj, "outs": outs}


def test_import_says_which_step_and_export_which(converted):
    d, b = converted["dir"], converted["baton"]
    assert converted["outs"] == [
        "imported %s into %s as step 0\n" % (d / "dcp-in", b), "imported ../in.pt into ../baton as step 9\n",
        "imported %s into %s as step 10\n" % (d / "dcp-in", b),
        "exported step 9 of %s to %s (torch)\n" % (b, d / "out.pt"),
        "exported step 10 of %s to %s (dcp)\n" % (b, d / "dcp-out")]


def test_imported_versions_verify_list_and_inspect(converted):
    b = converted["baton"]
    out = ok("verify", b)
    assert out.count("ok ") == 2 and "step 9" in out and "step 10" in out, out
    listed = json.loads(ok("ls", b, "--json"))
    # --keep 2 on the third import: step 0 went.
    assert [(v["step"], v["status"], v["world_size"]) for v in listed] == [(9, "complete", 1), (10, "complete", 1)]
    arrays = ok("inspect", b, "--step", "10")
    # One format (issue 46): the arrays Checkpointer names the same leaves by, the values in the tree's JSON.
    for name in ("model:layer:w", "model:half", "scale", "~baton.state_dict"):
        assert name in arrays, arrays
    assert "dcp-metadata" not in arrays and "step@b" not in arrays, arrays


def test_checkpointer_restores_an_imported_version(converted, tmp_path):
    """Issue 46 item 1: a version `baton ckpt import` wrote is read by Checkpointer.restore (not only by the
    exports), tensors and plain values equal to the DCP source's; in a process of its own (a Runtime), on a
    copy (a Checkpointer is the directory's writer: its run file, lock and event log)."""
    import sys
    import textwrap

    b = tmp_path / "copy"
    shutil.copytree(str(converted["baton"]), str(b))
    script = textwrap.dedent("""
        import sys, torch, baton
        rt = baton.Runtime()
        state = {"model": {"layer": {"w": torch.zeros(5, 3), "b": torch.zeros(4, dtype=torch.int64)},
                           "half": torch.zeros(2, 8, dtype=torch.bfloat16)},
                 "scale": torch.tensor(0.0), "step": 0, "tag": "", "lrs": [0.0, 0.0]}
        with baton.Checkpointer(rt, dir=sys.argv[1]) as ck:
            assert ck.restore(state, step=10) == 10
        torch.save(state, sys.argv[2])
        rt.close()
    """)
    out = tmp_path / "restored.pt"
    e = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_", "OPAL_"))}
    e["PYTHONPATH"] = os.path.join(BUILD, "python")
    p = subprocess.run([sys.executable, "-c", script, str(b), str(out)], capture_output=True, text=True, env=e,
                       timeout=120)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr[-4000:])
    same(torch.load(str(out), weights_only=True), converted["sd"])


def _run_python(script, *args):
    """Runs `script` with the build tree's package, outside any MPI job (a world of one); its stdout."""
    import sys

    e = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_", "OPAL_"))}
    e["PYTHONPATH"] = os.path.join(BUILD, "python")
    p = subprocess.run([sys.executable, "-c", script] + [str(a) for a in args], capture_output=True, text=True,
                       env=e, timeout=120)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr[-4000:])
    return p.stdout


def test_a_torch_save_import_is_a_checkpointer_save_of_the_object(converted, tmp_path):
    """The one walk (issue 46): `import` of a torch.save file saves the object with Checkpointer.save. Its tree
    holds the structure itself (no pickled copy of the object beside DCP's flat form, as before 2026-12-07: the
    __baton_torch_save_structure__ entry); only the values JSON cannot hold are kept as torch.save pickles
    them. Checkpointer.restore puts it into a module and an optimizer (int parameter ids as saved), and
    Checkpointer.load gives the object back, as the export does."""
    import textwrap

    b = tmp_path / "copy"
    shutil.copytree(str(converted["baton"]), str(b))
    script = textwrap.dedent("""
        import sys, torch, baton
        rt = baton.Runtime()
        m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
        opt = torch.optim.Adam(m.parameters(), lr=0.5)
        with baton.Checkpointer(rt, dir=sys.argv[1], read_only=True) as ck:
            blob = ck.read_metadata(9)["user_blob"]
            assert b"__baton_torch_save_structure__" not in blob
            print(blob.count(b'"$pickle"'))
            assert ck.restore({"model": m, "optimizer": opt}, step=9, strict=False) == 9
            torch.save({"model": m.state_dict(), "optimizer": opt.state_dict(), "whole": ck.load(9)}, sys.argv[2])
        rt.close()
    """)
    out = tmp_path / "restored.pt"
    assert _run_python(script, b, out).split() == ["2"]  # the torch.Size and the torch.dtype
    got = torch.load(str(out), weights_only=True)
    obj = converted["obj"]
    same(obj, got["whole"])
    same(obj["model"], got["model"])
    same(obj["optimizer"], got["optimizer"])


def test_a_torch_save_file_imported_before_exports_as_the_same_object(tmp_path):
    """A torch.save file imported by the code of 2026-12-07, before import went through Checkpointer.save (the
    checked-in fixtures/import-2026-12-07: DCP's flat form, the object's structure pickled beside it), exports as
    the object the file held, exactly, and Checkpointer.restore puts it into a module and an optimizer."""
    import textwrap

    fixture = os.path.join(HERE, "fixtures", "import-2026-12-07")
    d = tmp_path / "imported"
    shutil.copytree(os.path.join(fixture, "imported"), str(d))
    ok("export", d, tmp_path / "out.pt", "--format", "torch")
    source = torch.load(os.path.join(fixture, "source.pt"), weights_only=True)
    same(source, torch.load(str(tmp_path / "out.pt"), weights_only=True))
    script = textwrap.dedent("""
        import sys, torch, baton
        rt = baton.Runtime()
        m = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
        opt = torch.optim.AdamW(m.parameters(), lr=0.5)
        with baton.Checkpointer(rt, dir=sys.argv[1], read_only=True) as ck:
            assert ck.restore({"model": m, "optim": opt}, strict=False) == 7
        torch.save({"model": m.state_dict(), "optim": opt.state_dict()}, sys.argv[2])
        rt.close()
    """)
    _run_python(script, d, tmp_path / "restored.pt")
    got = torch.load(str(tmp_path / "restored.pt"), weights_only=True)
    for k, v in source["model"].items():
        assert torch.equal(got["model"][k], v), k
    same(source["optim"], got["optim"])


def test_export_of_a_torch_save_import_is_the_same_object(converted):
    back = torch.load(str(converted["dir"] / "out.pt"), weights_only=True)
    same(converted["obj"], back)
    # The optimizer state keeps its int keys: it loads into an optimizer (with str keys it would load nothing).
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    m.load_state_dict(back["model"])
    opt = torch.optim.Adam(m.parameters(), lr=0.01)
    opt.load_state_dict(back["optimizer"])
    assert torch.equal(opt.state[m[0].weight]["exp_avg"], converted["obj"]["optimizer"]["state"][0]["exp_avg"])


def test_export_to_dcp_loads_equal_to_the_dcp_source(converted):
    d, sd = converted["dir"], converted["sd"]
    target = {"model": {"layer": {"w": torch.zeros(5, 3), "b": torch.zeros(4, dtype=torch.int64)},
                        "half": torch.zeros(2, 8, dtype=torch.bfloat16)},
              "scale": torch.tensor(0.0), "step": 0, "tag": "", "lrs": []}
    dcp.load(target, storage_reader=FileSystemReader(str(d / "dcp-out")), no_dist=True)
    same(sd, target)
    # The whole checkpoint, as DCP's own converter reads it, equals the source's, and the metadata describes the same
    # state (the torch.save import's structure entry is not in a DCP export).
    dcp_to_torch_save(str(d / "dcp-in"), str(d / "a.pt"))
    dcp_to_torch_save(str(d / "dcp-out"), str(d / "b.pt"))
    same(torch.load(str(d / "a.pt")), torch.load(str(d / "b.pt")))
    src, out = FileSystemReader(str(d / "dcp-in")).read_metadata(), FileSystemReader(str(d / "dcp-out")).read_metadata()
    assert src.state_dict_metadata == out.state_dict_metadata


def test_force_replaces_an_export_and_only_an_export(converted, tmp_path):
    d, b = converted["dir"], converted["baton"]
    dst = tmp_path / "dst"
    shutil.copytree(str(d / "dcp-out"), str(dst))  # what `export` wrote before (one converter run less)
    (dst / "stale.distcp").write_bytes(b"old")
    rc, _, err = baton("export", b, dst, "--step", "10")
    assert rc == 2 and "%s exists: refusing to overwrite it (--force replaces it)" % dst in err, (rc, err)
    ok("export", b, dst, "--step", "10", "--force")
    assert not (dst / "stale.distcp").exists() and (dst / ".metadata").is_file()
    assert sorted(p for p in os.listdir(tmp_path)) == ["dst"]  # no temporary left beside it
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    rc, _, err = baton("export", b, other, "--force")
    assert rc == 2 and "%s exists and is not a DCP checkpoint directory" % other in err, (rc, err)
    assert (other / "keep.txt").read_text() == "mine"


def _bad_cases(d, b):
    notdcp = d / "notdcp"
    notdcp.mkdir(exist_ok=True)
    (notdcp / "x.txt").write_text("x")
    junk = d / "junk.bin"
    junk.write_bytes(b"\x00not a torch file\xff" * 8)
    existing = d / "taken.pt"
    existing.write_bytes(b"mine")
    return [  # (arguments, text stderr must hold)
        (["import", d / "missing.pt", d / "new1"], "import: %s: no such file or directory" % (d / "missing.pt")),
        (["import", notdcp, d / "new2"], "import: %s is a directory without .metadata: not a DCP checkpoint" % notdcp),
        (["import", b, d / "new3"], "it is a baton checkpoint directory"),
        (["import", junk, d / "new4"], "import: %s is not a torch.save file that torch.load(weights_only=True) reads"
     % junk),
        (["import", d / "in.pt", notdcp], "import: %s holds files but no baton checkpoint" % notdcp),
        (["import", d / "in.pt", d / "new5", "--bogus"], "unrecognised option '--bogus'"),
        (["import", d / "in.pt", d / "new6", "--keep", "0"], "--keep: invalid value '0'"),
        (["export", b, d / "new7", "--format", "zip"], "--format: invalid value 'zip' (expected dcp or torch)"),
        (["export", b, d / "new8", "--step", "-1"], "--step: invalid value '-1'"),
        (["export", b, d / "new9", "--step", "4"], "export: %s holds no version of step 4" % b),
        (["export", notdcp, d / "new10"], "export: %s holds no baton checkpoint (no 'run' file)" % notdcp),
        (["export", d / "nowhere", d / "new11"], "export: %s: no such directory" % (d / "nowhere")),
        (["export", b, existing, "--format", "torch"], "export: %s exists: refusing to overwrite it" % existing),
        (["export", b, d / "no" / "dir.pt", "--format", "torch"], "export: %s: no such directory" % (d / "no")),
        (["import", d / "in.pt"], "give SRC and DIR"),
    ]


def test_bad_input_exits_2_naming_it_and_writes_nothing(converted):
    d, b = converted["dir"], converted["baton"]
    cases = _bad_cases(d, b)
    before = _tree(d, str(b))
    failed = []
    for args, text in cases:
        rc, out, err = baton(*args)
        if rc != 2 or text not in err:
            failed.append((args, rc, out, err))
    assert not failed, failed
    after = _tree(d, str(b))
    assert after == before, set(after.items()) ^ set(before.items())


def test_no_command_writes_into_the_jobs_event_log(converted, tmp_path):
    """Issue 47: failed `baton ckpt export` runs were logged as launches of the job (its restore through a
    Checkpointer), and `baton report` showed a goodput of 1.6 % instead of 6.3 %. The imports and exports of the
    fixture left no event log; a job's log (SLURM_JOB_ID 4242, rank 0) stays byte for byte as it was through an
    export, a failed one, an import, ls, verify, inspect and report."""
    d, b = converted["dir"], converted["baton"]
    assert not os.path.exists(b / "events"), sorted(os.listdir(b / "events"))
    (b / "events").mkdir()
    log = b / "events" / "4242-r0.jsonl"
    log.write_text('{"ev":"start","t":1.0,"launch":"4242.0","world":1}\n')
    before = log.read_bytes()
    job = {"SLURM_JOB_ID": "4242", "SLURM_PROCID": "0"}
    runs = [baton("export", b, tmp_path / "x.pt", "--step", "9", "--format", "torch", env=job),
            baton("export", b, tmp_path / "y.pt", "--step", "77", "--format", "torch", env=job),
            baton("import", d / "in.pt", tmp_path / "other", env=job),
            baton("ls", b, env=job), baton("verify", b, env=job), baton("inspect", b, env=job)]
    assert [r[0] for r in runs] == [0, 2, 0, 0, 0, 0], runs
    e = dict(os.environ, **job)
    rep = subprocess.run([BATON, "report", str(b)], capture_output=True, text=True, env=e, timeout=60)
    assert sorted(os.listdir(b / "events")) == ["4242-r0.jsonl"], sorted(os.listdir(b / "events"))
    assert log.read_bytes() == before, (log.read_text(), rep.stdout, rep.stderr)
    assert not os.path.exists(tmp_path / "other" / "events")
    shutil.rmtree(b / "events")


def test_without_torch_the_interpreter_and_the_install_are_named(converted, tmp_path):
    d = converted["dir"]
    # An interpreter that cannot import torch: a sitecustomize (found first on PYTHONPATH) blocks it.
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['torch'] = None\n")
    rc, _, err = baton("import", d / "in.pt", tmp_path / "new", env={"PYTHONPATH": str(tmp_path)})
    assert rc == 2, (rc, err)
    assert "cannot import torch" in err and "scripts/install-deps --with-torch" in err, err
    # Nor numpy, which `import baton` needs: named as well (not a traceback and exit 1).
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['numpy'] = None\n")
    rc, _, err = baton("import", d / "in.pt", tmp_path / "new", env={"PYTHONPATH": str(tmp_path)})
    assert rc == 2 and "cannot import numpy" in err and "scripts/install-deps --with-torch" in err, (rc, err)
    rc, _, err = baton("import", d / "in.pt", tmp_path / "new", env={"BATON_PYTHON": str(tmp_path / "nopython")})
    assert rc == 2 and "the Python interpreter %s (BATON_PYTHON) cannot be run" % (tmp_path / "nopython") in err, err
    assert "scripts/install-deps --with-torch" in err, err
    assert sorted(os.listdir(tmp_path)) == ["sitecustomize.py"]


_HOLDER = """
import sys
import baton
rt = baton.Runtime()
ck = baton.ArrayCheckpointer(rt, dir=sys.argv[1])
print("held", flush=True)
sys.stdin.read()  # until the test closes it
ck.close()
rt.close()
"""


def test_a_live_writer_is_named_at_once_not_waited_for(converted, tmp_path):
    """A Checkpointer of another process holds DIR's writer.lock: import and export fail with 1 naming it (pid), at
    once rather than after the Checkpointer's 120 s wait for the lock (the 60 s bound below)."""
    b = tmp_path / "b"
    shutil.copytree(str(converted["baton"]), str(b))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_", "OPAL_"))}
    env["PYTHONPATH"] = os.path.join(BUILD, "python") + os.pathsep + env.get("PYTHONPATH", "")
    holder = subprocess.Popen([os.environ.get("BATON_PYTHON", "python3"), "-c", _HOLDER, str(b)], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        for args in (["export", b, tmp_path / "out"], ["import", converted["dir"] / "in.pt", b]):
            rc, _, err = baton(*args, timeout=60)
            assert rc == 1, (args, rc, err)
            assert "%s/writer.lock is held by pid %d" % (b, holder.pid) in err and "a live writer uses" in err, err
        assert not (tmp_path / "out").exists()
    finally:
        holder.stdin.close()
        assert holder.wait(timeout=60) == 0


_SHARDED_SAVE = """
import datetime, sys
import torch, torch.distributed as dist, torch.distributed.checkpoint as dcp
import baton
from baton.dcp import BatonWriter
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
rt = baton.Runtime()
dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=rt.rank, world_size=rt.size,
                        timeout=datetime.timedelta(seconds=120))
mesh = init_device_mesh("cpu", (rt.size,))
full = torch.arange(48, dtype=torch.float32).reshape(8, 6)
sd = {"w0": distribute_tensor(full, mesh, [Shard(0)]), "w1": distribute_tensor(full * 2, mesh, [Shard(1)]),
      "r": distribute_tensor(full + 1, mesh, [Replicate()]), "step": 5}
dcp.save(sd, storage_writer=BatonWriter(sys.argv[1], runtime=rt))
dist.destroy_process_group()
rt.close()
"""


def test_export_of_a_version_two_ranks_wrote_as_dtensor_shards(tmp_path):
    """What an FSDP2 job leaves (DTensors Shard(0), Shard(1), Replicate() saved through BatonWriter by 2 ranks)
    exports in one process to a torch.save file of the full tensors."""
    b = tmp_path / "b"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_", "OPAL_"))}
    env["PYTHONPATH"] = os.path.join(BUILD, "python") + os.pathsep + env.get("PYTHONPATH", "")
    env["BATON_COLLECTIVE_TIMEOUT"] = "60"
    p = subprocess.run([os.path.join(HERE, "..", "lib", "mpirun-ranks"), "2", os.environ.get("BATON_PYTHON", "python3"),
                        "-c", _SHARDED_SAVE, str(b), str(tmp_path / "store")], env=env, capture_output=True,
                       text=True, timeout=180)
    assert p.returncode == 0, (p.stdout, p.stderr[-3000:])
    assert json.loads(ok("ls", b, "--json"))[0]["world_size"] == 2
    ok("export", b, tmp_path / "out.pt", "--format", "torch")
    full = torch.arange(48, dtype=torch.float32).reshape(8, 6)
    same({"w0": full, "w1": full * 2, "r": full + 1, "step": 5}, torch.load(str(tmp_path / "out.pt"), weights_only=True))
