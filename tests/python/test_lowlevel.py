"""The low-level API of baton._baton: Runtime, ArrayCheckpointer, errors.

Run on every rank of an mpirun launch (tests/python/run-pytest, 1 and 3
ranks); each test makes its own Runtime (the `rt` fixture).
"""
import glob
import json
import os
import socket
import threading
import time

import numpy as np
import pytest

from baton import _baton


def ckpt(rt, shared_dir, **kw):
    kw.setdefault("level2", False)
    return _baton.ArrayCheckpointer(rt, dir=shared_dir, **kw)


def knows(name):
    """Whether this baton has the dtype `name` (some arrive with later changes)."""
    try:
        _baton._parse_dtype(name)
        return True
    except _baton.InvalidArgument:
        return False


# ---- module and errors -----------------------------------------------------------

def test_exit_requeue():
    assert _baton.EXIT_REQUEUE == 75


def test_exception_hierarchy():
    assert issubclass(_baton.Error, Exception)
    assert issubclass(_baton.InvalidArgument, _baton.Error) and issubclass(_baton.InvalidArgument, ValueError)
    assert issubclass(_baton.TimeoutError, _baton.Error) and issubclass(_baton.TimeoutError, TimeoutError)
    assert issubclass(_baton.IOError, _baton.Error) and issubclass(_baton.IOError, OSError)
    for name in ("NotFound", "CorruptCheckpointError", "Unavailable", "Aborted", "InternalError"):
        assert issubclass(getattr(_baton, name), _baton.Error), name


def test_error_names_rank_host_and_value(rt, shared_dir):
    ck = ckpt(rt, shared_dir)
    ck.register_replicated("a", np.zeros(4, np.float32))
    with pytest.raises(_baton.NotFound) as e:
        ck.restore(step=12345)
    msg = str(e.value)
    assert "rank %d on %s" % (rt.rank, socket.gethostname()) in msg, msg
    assert "12345" in msg, msg
    assert e.value.code == "NotFound" and e.value.component == "ckpt" and "rank" in e.value.where
    ck.close()


# ---- Runtime ------------------------------------------------------------------------

def test_runtime_topology(rt, rank, size):
    assert (rt.rank, rt.size) == (rank, size)
    assert rt.host == socket.gethostname() == rt.host_of(rank)
    assert (rt.node, rt.num_nodes) == (0, 1)  # one host
    assert (rt.local_rank, rt.local_size) == (rank, size)
    assert rt.collective_timeout == float(os.environ.get("BATON_COLLECTIVE_TIMEOUT", 600))
    assert "rank %d of %d" % (rank, size) in repr(rt)
    with pytest.raises(_baton.InvalidArgument):
        rt.host_of(size)


def test_runtime_close_is_idempotent_and_closes_checkpointers(shared_dir):
    rt = _baton.Runtime(collective_timeout=30)
    assert rt.collective_timeout == 30
    ck = ckpt(rt, shared_dir)
    rt.close()
    assert ck.closed and rt.closed
    rt.close()
    with pytest.raises(_baton.InvalidArgument, match="closed"):
        rt.rank


def test_runtime_bad_timeout():
    with pytest.raises(_baton.InvalidArgument, match="collective_timeout"):
        _baton.Runtime(collective_timeout=-1)


@pytest.mark.parametrize("sig", ["SIGUSR2", "SIGTERM"])
def test_agreed_stop_from_a_signal(rt, sig):
    """A stop signal on the last rank: should_stop() is True on every rank at the same call."""
    import signal
    assert rt.should_stop() is False
    if rt.rank == rt.size - 1:
        os.kill(os.getpid(), getattr(signal, sig))
    assert rt.should_stop() is True
    assert rt.should_stop() is True  # stays


# ---- round trips ----------------------------------------------------------------------

NUMPY_DTYPES = [("f32", np.float32), ("f64", np.float64), ("f16", np.float16), ("i32", np.int32),
                ("i64", np.int64), ("u8", np.uint8), ("bool", np.bool_), ("i8", np.int8), ("i16", np.int16),
                ("u16", np.uint16), ("u32", np.uint32), ("u64", np.uint64)]


def values(np_dtype, n, seed):
    r = np.random.default_rng(seed)
    if np_dtype == np.bool_:
        return r.integers(0, 2, n).astype(np.bool_)
    if np.issubdtype(np_dtype, np.integer):
        info = np.iinfo(np_dtype)
        return r.integers(info.min, info.max, n, dtype=np_dtype, endpoint=True)
    return r.standard_normal(n).astype(np_dtype)


@pytest.mark.parametrize("name,np_dtype", NUMPY_DTYPES, ids=[d[0] for d in NUMPY_DTYPES])
def test_round_trip_numpy(rt, shared_dir, name, np_dtype):
    if not knows(name):
        pytest.skip("this baton has no dtype %s yet (baton::ParseDType refuses it)" % name)
    rows, cols = 5, 3
    rep = values(np_dtype, 7 * 2, 1).reshape(7, 2)
    full = values(np_dtype, rows * rt.size * cols, 2).reshape(rows * rt.size, cols)
    mine = full[rt.rank * rows:(rt.rank + 1) * rows].copy()
    ck = ckpt(rt, shared_dir)
    ck.register_replicated("rep", rep)
    ck.register_sharded("shard", mine, offset=rt.rank * rows, global_shape=full.shape)
    ck.save(3)
    saved_rep, saved_mine = rep.copy(), mine.copy()
    rep[...] = 0
    mine[...] = 0
    assert ck.restore() == 3
    assert rep.tobytes() == saved_rep.tobytes() and mine.tobytes() == saved_mine.tobytes()
    meta = ck.read_metadata()
    arrays = {a["name"]: a for a in meta["arrays"]}
    assert arrays["rep"] == {"name": "rep", "dtype": name, "shape": (7, 2), "replicated": True}
    assert arrays["shard"] == {"name": "shard", "dtype": name, "shape": full.shape, "replicated": False}
    assert meta["world_size"] == rt.size and meta["step"] == 3
    ck.close()


def test_bf16_from_numpy_bits(rt, shared_dir):
    bits = np.arange(12, dtype=np.uint16).reshape(3, 4) + 0x3F80
    ck = ckpt(rt, shared_dir)
    ck.register_replicated("emb", bits, dtype="bf16")
    ck.save(1)
    saved = bits.copy()
    bits[...] = 0
    assert ck.restore() == 1
    assert (bits == saved).all()
    assert ck.read_metadata()["arrays"][0]["dtype"] == "bf16"
    ck.close()


def test_scalar_and_empty_arrays(rt, shared_dir):
    s = np.array(2.5, dtype=np.float64)
    e = np.zeros((0, 3), dtype=np.float32)
    ck = ckpt(rt, shared_dir)
    ck.register_replicated("scalar", s)
    ck.register_replicated("empty", e)
    ck.save(1)
    s[()] = 0
    assert ck.restore() == 1 and s[()] == 2.5
    ck.close()


def test_sharded_global_shape_agreed(rt, shared_dir):
    """global_shape=None: dim 0 is found collectively; uneven shards."""
    rows = [2, 0, 5][rt.rank % 3] if rt.size > 1 else 4
    offsets = [0, 2, 2] if rt.size == 3 else [0]
    mine = np.full((rows, 2), rt.rank + 1, dtype=np.int64)
    ck = ckpt(rt, shared_dir)
    ck.register_sharded("s", mine, offset=offsets[rt.rank])
    ck.save(1)
    meta = ck.read_metadata()
    assert meta["arrays"][0]["shape"] == ((7, 2) if rt.size == 3 else (4, 2))
    mine[...] = 0
    ck.restore()
    assert (mine == rt.rank + 1).all()
    ck.close()


def test_registration_copies_nothing(rt, shared_dir):
    a = np.zeros(1000, dtype=np.float32)
    ck = ckpt(rt, shared_dir)
    ck.register_replicated("a", a)
    a[:] = 7  # after registration: this is what is saved
    ck.save(1)
    a[:] = 0
    ck.restore()
    assert (a == 7).all()
    ck.close()


def test_save_async_saves_the_bytes_at_the_call(rt, shared_dir):
    a = np.arange(1 << 20, dtype=np.float64)  # 8 MiB: the write outlasts the changes below
    ck = ckpt(rt, shared_dir)
    ck.register_replicated("a", a)
    ck.save_async(1)
    a[:] = -1  # right after it returns
    assert ck.async_status() in ("writing", "written")
    ck.wait()
    assert ck.async_status() == "idle"
    a[:] = 0
    assert ck.restore() == 1
    assert (a == np.arange(1 << 20, dtype=np.float64)).all()
    ck.close()


def test_event_log_steps_loss_and_failure(rt, shared_dir):
    """rt.begin_step/end_step and Runtime.record_failure reach the job's event log
    (docs/events.md), which `baton report` reads."""
    ck = ckpt(rt, shared_dir)  # opens <dir>/events/<job>-r<rank>.jsonl
    ck.register_replicated("a", np.ones(4, dtype=np.float32))
    for step in (1, 2, 3):
        rt.begin_step(step)
        rt.end_step(loss=0.5 * step)
    rt.begin_step(4)
    rt.end_step()  # no loss
    ck.save(4)  # a save writes the log out
    _baton.Runtime.record_failure("test: a named \x1b failure")
    # The kind `baton run` decides by, whatever the text says.
    _baton.Runtime.record_failure("uncaught-looking text of a program's own failure")
    _baton.Runtime.record_failure("x", kind="uncaught")
    _baton.Runtime.record_failure("y", kind="refused")
    with pytest.raises(ValueError, match="kind 'bug' is none of 'other', 'uncaught', 'refused'"):
        _baton.Runtime.record_failure("z", kind="bug")
    files = glob.glob(os.path.join(shared_dir, "events", "*-r%d.jsonl" % rt.rank))
    assert len(files) == 1, files
    with open(files[0]) as f:
        recs = [json.loads(line) for line in f]
    steps = [r for r in recs if r["ev"] == "step"]
    assert [(r["step"], r.get("loss")) for r in steps] == [(1, 0.5), (2, 1.0), (3, 1.5), (4, None)]
    assert all(r["dur"] >= 0 for r in steps)
    saves = [r for r in recs if r["ev"] == "save"]
    assert len(saves) == 1 and saves[0]["step"] == 4
    failures = [r for r in recs if r["ev"] == "failure"]
    assert [(r["what"], r["kind"]) for r in failures] == [
        ("test: a named \x1b failure", "other"), ("uncaught-looking text of a program's own failure", "other"),
        ("x", "uncaught"), ("y", "refused")]
    # Out of order: named, and nothing written.
    with pytest.raises(_baton.InvalidArgument, match="EndStep without BeginStep"):
        rt.end_step()
    ck.close()


def test_blobs_stats_and_last_restore(rt, shared_dir):
    a = np.ones(10, dtype=np.float32)
    ck = ckpt(rt, shared_dir)
    ck.register_replicated("a", a)
    ck.user_blob = b"job-wide \x00 bytes"
    ck.rank_state = b"rank %d" % rt.rank
    ck.save(2)
    st = ck.last_stats()
    assert st["step"] == 2 and st["total_bytes"] >= 40 and st["seconds"] > 0
    assert "write" in st["phases"] and all(v >= 0 for v in st["phases"].values())
    ck.close()
    ck = ckpt(rt, shared_dir)
    ck.register_replicated("a", a)
    assert ck.last_restore() is None
    assert ck.restore() == 2
    assert ck.user_blob == b"job-wide \x00 bytes" and ck.rank_state == b"rank %d" % rt.rank
    lr = ck.last_restore()
    assert lr["step"] == 2 and lr["level"] == 3 and lr["fallbacks"] == [] and not lr["rank_state_dropped"]
    assert lr["version_path"].startswith(shared_dir)
    md = ck.read_metadata()
    assert md["has_rank_state"] and md["user_blob_bytes"] == len(b"job-wide \x00 bytes")
    assert ck.dir == shared_dir and ck.run_id
    ck.close()


def test_first_run_restores_nothing(rt, shared_dir):
    ck = ckpt(rt, shared_dir)
    ck.register_replicated("a", np.zeros(3))
    assert ck.restore() is None
    assert ck.read_metadata() is None
    assert ck.last_restore()["step"] is None
    ck.close()


# ---- bad input, each named --------------------------------------------------------------

def bad(rt, shared_dir, register, match):
    ck = ckpt(rt, shared_dir)
    with pytest.raises(_baton.InvalidArgument, match=match) as e:
        register(ck)
    assert isinstance(e.value, ValueError)
    assert "rank %d on %s" % (rt.rank, rt.host) in str(e.value)
    ck.close()
    return str(e.value)


def test_restore_pinned_to_a_version_or_older_than_one(rt, shared_dir):
    """Issue 46 item 2: the one listing answers 'this version' and 'the next older one' for every front end."""
    a = np.zeros(4, np.float32)
    ck = ckpt(rt, shared_dir)
    ck.register_replicated("a", a)
    for step in (1, 2, 3):
        a[:] = step
        ck.save(step)
    names = [name for name, _ in _baton._committed_versions(shared_dir)]
    assert [s for _, s in _baton._committed_versions(shared_dir)] == [1, 2, 3]
    assert ck.restore(version=names[1]) == 2 and a[0] == 2
    assert ck.last_restore()["version_path"].endswith(names[1])
    assert ck.restore(older_than=names[1]) == 1 and a[0] == 1
    assert ck.restore(older_than=names[0]) is None  # none older
    assert ck.read_metadata(older_than=names[2])["step"] == 2
    with pytest.raises(_baton.NotFound, match="no committed version of step 3 older than " + names[2]):
        ck.read_metadata(3, older_than=names[2])
    ck.close()


def test_restore_pinned_refuses_what_it_cannot_pin(rt, shared_dir):
    ck = ckpt(rt, shared_dir)
    ck.register_replicated("a", np.zeros(4, np.float32))
    ck.save(5)
    (only, _), = _baton._committed_versions(shared_dir)
    with pytest.raises(_baton.InvalidArgument, match="version 'x/../v1' is not a version's name"):
        ck.restore(version="x/../v1")
    with pytest.raises(_baton.InvalidArgument, match="older_than 'v1' is not a version's name"):
        ck.restore(older_than="v1")
    with pytest.raises(_baton.NotFound, match="no committed version v00000009-s5 "):
        ck.restore(version="v00000009-s5")
    with pytest.raises(_baton.NotFound, match="no committed version of step 5 older than " + only):
        ck.restore(step=5, older_than=only)
    assert _baton._committed_versions(os.path.join(shared_dir, "absent")) == []
    ck.close()


def test_bad_non_contiguous(rt, shared_dir):
    a = np.zeros((4, 6), dtype=np.float32)
    bad(rt, shared_dir, lambda ck: ck.register_replicated("strided", a[:, ::2]), "array 'strided' is not C-contiguous")
    bad(rt, shared_dir, lambda ck: ck.register_replicated("fortran", np.asfortranarray(a)), "'fortran' is not C-contig")


def test_bad_read_only(rt, shared_dir):
    a = np.zeros(4, dtype=np.float32)
    a.setflags(write=False)
    bad(rt, shared_dir, lambda ck: ck.register_replicated("ro", a), "array 'ro' is read-only")


@pytest.mark.parametrize("np_dtype", [np.complex64, np.complex128, object, np.longdouble, "datetime64[s]"])
def test_bad_dtype(rt, shared_dir, np_dtype):
    a = np.zeros(4, dtype=np_dtype)
    msg = bad(rt, shared_dir, lambda ck: ck.register_replicated("odd", a), "array 'odd'")
    assert str(np.dtype(np_dtype)) in msg, msg


def test_bad_dtype_override(rt, shared_dir):
    a = np.zeros(4, dtype=np.float32)
    bad(rt, shared_dir, lambda ck: ck.register_replicated("x", a, dtype="bf16"), "array 'x': dtype='bf16' has 2-byte")
    bad(rt, shared_dir, lambda ck: ck.register_replicated("x", a, dtype="f128"), "array 'x': dtype='f128' is not")


def test_bad_shapes(rt, shared_dir):
    a = np.zeros((4, 3), dtype=np.float32)
    bad(rt, shared_dir, lambda ck: ck.register_sharded("s", a, 0, global_shape=(8, 2)),
        r"array 's': global_shape \(8, 2\) does not fit this rank's shard of shape \(4, 3\)")
    bad(rt, shared_dir, lambda ck: ck.register_sharded("s", a, 6, global_shape=(8, 3)), r"array 's': rows \[6, 10\)")
    bad(rt, shared_dir, lambda ck: ck.register_sharded("s", np.array(1.0), 0, global_shape=()), "array 's' is a scalar")


def test_bad_not_an_array(rt, shared_dir):
    bad(rt, shared_dir, lambda ck: ck.register_replicated("l", [1.0, 2.0]), "array 'l' is a list")


def test_bad_name(rt, shared_dir):
    bad(rt, shared_dir, lambda ck: ck.register_replicated("a/b", np.zeros(2)), "a/b")


def test_restore_shape_mismatch_is_named(rt, shared_dir):
    ck = ckpt(rt, shared_dir)
    ck.register_replicated("w", np.zeros((2, 3), np.float32))
    ck.save(1)
    ck.close()
    ck = ckpt(rt, shared_dir)
    ck.register_replicated("w", np.zeros((3, 3), np.float32))
    with pytest.raises(_baton.InvalidArgument, match="w"):
        ck.restore()
    ck.close()


def test_one_thread_at_a_time(rt, shared_dir):
    a = np.zeros(1 << 22, dtype=np.float64)  # 32 MiB
    ck = ckpt(rt, shared_dir)
    ck.register_replicated("a", a)
    errors = []
    started = threading.Event()

    def other():
        started.wait()
        time.sleep(0.01)
        try:
            ck.async_status()
            ck.user_blob = b"x"
        except _baton.Error as e:
            errors.append(e)
    t = threading.Thread(target=other)
    t.start()
    started.set()
    ck.save(1)
    t.join()
    # The other thread either ran between calls or was refused by name.
    for e in errors:
        assert isinstance(e, _baton.Unavailable) and "another thread" in str(e)
    ck.close()


# ---- the GIL ------------------------------------------------------------------------------

def test_gil_released_during_save(rt, shared_dir):
    """A Python thread (a data loader) runs while save() writes."""
    a = np.random.default_rng(0).standard_normal(1 << 23)  # 64 MiB
    ck = ckpt(rt, shared_dir)
    ck.register_replicated("a", a)
    ticks, stop = [], threading.Event()

    def loader():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.001)
    t = threading.Thread(target=loader)
    t.start()
    time.sleep(0.05)
    t0 = time.monotonic()
    ck.save(1)
    t1 = time.monotonic()
    stop.set()
    t.join()
    during = [x for x in ticks if t0 < x < t1]
    assert t1 - t0 > 0.02, "the save was too short to tell (%.3f s)" % (t1 - t0)
    assert len(during) >= 5, "the thread ran %d times during a %.3f s save" % (len(during), t1 - t0)
    ck.close()


# ---- a failed call leaves nothing behind that hangs the next ---------------------------------

def test_failed_saves_then_a_good_one(rt, shared_dir):
    a = np.full(64, float(rt.rank if rt.size > 1 else 0), dtype=np.float32)
    ck = ckpt(rt, shared_dir)
    ck.register_replicated("a", a)
    with pytest.raises(_baton.InvalidArgument, match="-1"):
        ck.save(-1)  # refused on every rank before anything is written
    if rt.size > 1:
        # replicas that differ: refused on every rank, naming the array
        with pytest.raises(_baton.InvalidArgument, match="'a'|a\\b"):
            ck.save(1)
        with pytest.raises(_baton.InvalidArgument):
            ck.save_async(1)
        a[:] = 0
    ck.save_async(2)
    ck.wait()
    ck.save(3)
    assert ck.restore() == 3
    assert [m["step"] for m in [ck.read_metadata(step=2), ck.read_metadata(step=3)]] == [2, 3]
    ck.close()


def test_wait_timeout_and_wait_or_abandon(rt, shared_dir):
    a = np.ones(1 << 20, dtype=np.float64)
    ck = ckpt(rt, shared_dir)
    ck.register_replicated("a", a)
    ck.save_async(1)
    ck.wait(timeout=600)
    ck.save_async(2)
    try:
        ck.wait_or_abandon(60)  # written within a minute here: committed, no exception
    except _baton.Aborted:
        pytest.fail("a small save was abandoned")
    assert ck.restore() == 2
    ck.close()
