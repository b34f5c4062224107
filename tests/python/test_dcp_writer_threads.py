"""BatonWriter's checkpointer and threads (python/baton/dcp/open_checkpointers.py): one checkpointer per
directory stays open across saves, opened on the program's thread; under dcp.async_save DCP's background
thread calls MPI only on the checkpointer's own communicators; a second save on a directory waits for the
save in flight there; the writer closes what it opened (issue 46 items 11 and 14, issue 48 item 4).
tests/python/run-pytest runs these on every rank in order, over one gloo process group."""
import os
import subprocess
import sys
import threading
import time

import pytest

torch = pytest.importorskip("torch")
dcp = pytest.importorskip("torch.distributed.checkpoint")

import conftest  # noqa: E402  (tests/python/conftest.py: the launcher's rank and size)
import gloo_world  # noqa: E402  (tests/python/, on pytest's rootdir path)

from baton import _baton  # noqa: E402
from baton.dcp import BatonReader, BatonWriter  # noqa: E402


@pytest.fixture(scope="module")
def dist():
    d = gloo_world.world(conftest.RANK, conftest.SIZE, "test_dcp_writer_threads")
    yield d
    gloo_world.close()


def _state(seed, n=64):
    g = torch.Generator().manual_seed(seed)
    return {"w": torch.randn(n, 8, generator=g), "b": torch.randn(8, generator=g), "meta": {"seed": seed}}


def _load(d, rt, step=None):
    got = {"w": torch.zeros(64, 8), "b": torch.zeros(8), "meta": {"seed": None}}
    dcp.load(got, storage_reader=BatonReader(d, step=step, runtime=rt))
    return got


def _same(got, want):
    return torch.equal(got["w"], want["w"]) and torch.equal(got["b"], want["b"]) and got["meta"] == want["meta"]


class _Watch:
    """Records which thread opens an ArrayCheckpointer and which calls the Runtime's all-gather."""

    def __init__(self, monkeypatch):
        self.opens, self.runtime_gathers = [], []
        real_ck, real_gather = _baton.ArrayCheckpointer, _baton._allgather_bytes

        def opening(*a, **kw):
            self.opens.append(threading.current_thread().name)
            return real_ck(*a, **kw)

        def gathering(runtime, data, what, **kw):
            self.runtime_gathers.append((threading.current_thread().name, what))
            return real_gather(runtime, data, what, **kw)

        monkeypatch.setattr(_baton, "ArrayCheckpointer", opening)
        monkeypatch.setattr(_baton, "_allgather_bytes", gathering)


def _held(d):
    """Whether this process holds `d`'s writer lock (rank 0 takes it for every rank: ask there only)."""
    with open(os.path.join(d, "writer.lock")) as f:
        return f.read().startswith("pid %d " % os.getpid())


def test_one_checkpointer_stays_open_across_saves(dist, rt, shared_dir, monkeypatch, rank):
    """Five saves (a writer each, as DCP programs often make; sync and async) open the directory's
    checkpointer once, on the program's thread; it stays open (the directory held) until close(). Before,
    each save opened and closed one (its lock, communicator duplicates and their collectives)."""
    watch = _Watch(monkeypatch)
    states = [_state(s) for s in range(5)]
    for s in (0, 1, 2):
        dcp.save(states[s], storage_writer=BatonWriter(shared_dir, runtime=rt))
    for s in (3, 4):
        dcp.async_save(states[s], storage_writer=BatonWriter(shared_dir, runtime=rt)).result(timeout=120)
    assert watch.opens == [threading.main_thread().name], watch.opens
    monkeypatch.undo()
    assert rank != 0 or _held(shared_dir)
    writer = BatonWriter(shared_dir, runtime=rt)
    writer.close()
    writer.close()  # twice: harmless
    assert rank != 0 or not _held(shared_dir)
    for s in (2, 3, 4):  # keep=3; steps chosen one after the other without reading the directory again
        assert _same(_load(shared_dir, rt, step=s), states[s]), s


def test_async_save_calls_mpi_only_on_its_checkpointers_communicators(dist, rt, shared_dir, monkeypatch, rank,
                                                                       size):
    """While DCP's thread saves, the program's thread runs its own collectives on the Runtime's world, many
    times; every one of them gets the right bytes, and DCP's thread never opens a checkpointer nor gathers on
    the Runtime's world (before, it did both, and the two threads' collectives met in another order on each
    rank)."""
    watch = _Watch(monkeypatch)
    states = [_state(10 + s) for s in range(3)]
    overlapped = 0
    for s, sd in enumerate(states):
        future = dcp.async_save(sd, storage_writer=BatonWriter(shared_dir, step=s, runtime=rt))
        overlapped += not future.done()
        for i in range(40):  # as many on every rank: the program's collectives match across ranks
            mine = b"%d:%d:%d" % (rank, s, i) * (1 + i % 7)
            got = _baton._allgather_bytes(rt, mine, "the program's own collective")
            assert got == [b"%d:%d:%d" % (r, s, i) * (1 + i % 7) for r in range(size)]
        future.result(timeout=120)
    main = threading.main_thread().name
    assert watch.opens == [main], watch.opens
    assert {t for t, _ in watch.runtime_gathers} == {main}, sorted(set(watch.runtime_gathers))[:5]
    assert overlapped >= 1  # the program's collectives ran while a save was in flight
    monkeypatch.undo()
    for s, sd in enumerate(states):
        assert _same(_load(shared_dir, rt, step=s), sd), s


def test_a_second_save_waits_for_the_one_in_flight(dist, rt, shared_dir):
    """Two dcp.async_saves on one directory, the second before the first's future was waited for (by the
    same writer, then by another writer, then a dcp.save): each waits, at its call, for the save before
    it to end, on every rank alike, and every version is committed whole. Before, the second met the first
    as "the ranks registered different arrays", "rows overlap" or a directory held by the first."""
    states = [_state(20 + s) for s in range(5)]
    writer = BatonWriter(shared_dir, keep=5, runtime=rt)
    first = dcp.async_save(states[0], storage_writer=writer)
    second = dcp.async_save(states[1], storage_writer=writer)
    assert first.done()  # the second call returned only after the first save had ended
    third = dcp.async_save(states[2], storage_writer=BatonWriter(shared_dir, keep=5, runtime=rt))
    assert second.done()
    dcp.save(states[3], storage_writer=BatonWriter(shared_dir, keep=5, runtime=rt))
    assert third.done()
    fourth = dcp.async_save(states[4], storage_writer=writer)
    for f in (first, second, third, fourth):
        f.result(timeout=120)
    writer.close()
    for s, sd in enumerate(states):
        assert _same(_load(shared_dir, rt, step=s), sd), s


def test_with_block_closes_and_other_openers_take_the_directory_over(dist, rt, shared_dir, rank):
    """A with block closes the writer's checkpointer. Another opener of a directory a writer holds (a
    BatonReader, a baton.Checkpointer, an ArrayCheckpointer) gets it: the writer's checkpointer is closed first,
    after the save in flight (instead of "held by another open checkpointer of this process"); the writer's
    next save opens it again."""
    import baton

    with BatonWriter(shared_dir, runtime=rt) as writer:
        dcp.save(_state(30), storage_writer=writer)
        assert rank != 0 or _held(shared_dir)
    assert rank != 0 or not _held(shared_dir)
    future = dcp.async_save(_state(31), storage_writer=BatonWriter(shared_dir, runtime=rt))
    assert _same(_load(shared_dir, rt), _state(31))  # waited for the save in flight
    assert future.done()
    dcp.save(_state(32), storage_writer=BatonWriter(shared_dir, runtime=rt))
    with baton.Checkpointer(rt, dir=shared_dir) as ck:  # one format: it reads what BatonWriter wrote
        got = {"w": torch.zeros(64, 8), "b": torch.zeros(8), "meta": {"seed": None}}
        assert ck.restore(got) == 2 and _same(got, _state(32))
    future = dcp.async_save(_state(33), storage_writer=BatonWriter(shared_dir, runtime=rt))
    _baton.ArrayCheckpointer(rt, dir=shared_dir).close()
    assert future.done()
    assert _same(_load(shared_dir, rt), _state(33))


def test_async_save_into_another_directory_than_the_writers_is_refused(dist, rt, shared_dir):
    """dcp.async_save's checkpoint_id reaches the writer on DCP's thread, after stage() opened the writer's
    directory on the program's: another directory there is refused naming both, on every rank."""
    from torch.distributed.checkpoint.api import CheckpointException

    writer = BatonWriter(os.path.join(shared_dir, "a"), runtime=rt)
    future = dcp.async_save(_state(40), checkpoint_id=os.path.join(shared_dir, "b"), storage_writer=writer)
    with pytest.raises(CheckpointException) as e:
        future.result(timeout=120)
    assert "names another directory than the writer's" in str(e.value) and "give the directory to BatonWriter(path)" \
        in str(e.value), str(e.value)
    writer.close()
    assert not os.path.exists(os.path.join(shared_dir, "b"))


def _quick_save(sd, writer):
    """dcp.save of `sd` through `writer`; the seconds it took."""
    start = time.monotonic()
    dcp.save(sd, storage_writer=writer)
    return time.monotonic() - start


def test_a_save_after_an_async_save_that_failed_before_its_thread_goes_on_at_once(dist, rt, shared_dir, monkeypatch):
    """dcp.async_save that fails after BatonWriter.stage() and before DCP's executor has the save (here its
    executor refuses the work, as after the interpreter's shutdown began) never runs that save: the next
    save on the directory goes on at once. Before, it waited collective_timeout (600 s by default) for a
    save that would never begin, then raised baton.TimeoutError ("DCP's thread never began it")."""
    from torch.distributed.checkpoint import _async_thread_executor

    def refuse(self, *args, **kwargs):
        raise RuntimeError("cannot schedule new futures after interpreter shutdown")

    writer = BatonWriter(shared_dir, runtime=rt)
    monkeypatch.setattr(_async_thread_executor._ThreadBasedAsyncCheckpointExecutor, "execute_save", refuse)
    with pytest.raises(RuntimeError, match="cannot schedule new futures"):
        dcp.async_save(_state(50), storage_writer=writer)
    monkeypatch.undo()
    assert _quick_save(_state(51), writer) < rt.collective_timeout / 2
    assert _same(_load(shared_dir, rt), _state(51))
    dcp.async_save(_state(52), storage_writer=writer).result(timeout=120)  # and the next async_save waits as ever
    writer.close()
    assert _same(_load(shared_dir, rt), _state(52))


def test_a_save_after_an_async_save_that_failed_before_the_writers_setup_goes_on_at_once(dist, rt, shared_dir):
    """DCP's thread began the save and failed before it reached the writer's set_up_storage_writer (here the
    planner's set_up_planner raises on every rank): the save has ended, and the next save goes on at once.
    Before, it waited collective_timeout for a save it believed had not begun, then raised baton.TimeoutError."""
    from torch.distributed.checkpoint import DefaultSavePlanner
    from torch.distributed.checkpoint.api import CheckpointException

    class Refusing(DefaultSavePlanner):
        def set_up_planner(self, state_dict, storage_meta=None, is_coordinator=False):
            raise ValueError("a planted planner failure")

    writer = BatonWriter(shared_dir, runtime=rt)
    future = dcp.async_save(_state(53), storage_writer=writer, planner=Refusing())
    with pytest.raises(CheckpointException, match="a planted planner failure"):
        future.result(timeout=120)
    assert _quick_save(_state(54), writer) < rt.collective_timeout / 2
    writer.close()
    assert _same(_load(shared_dir, rt), _state(54))


_LEFT_OPEN = r"""
import sys, torch, torch.distributed.checkpoint as dcp
import baton
from baton.dcp import BatonWriter
rt = baton.Runtime()
baton.init_process_group(rt)
w = BatonWriter(sys.argv[1], runtime=rt)
dcp.save({"w": torch.ones(4)}, storage_writer=w)
f = dcp.async_save({"w": torch.full((4,), 2.0)}, storage_writer=w)
print("leaving", flush=True)
"""


def test_a_writer_left_open_at_exit_ends_the_process(dist, shared_dir, rank):
    """A program that leaves its writer open, a dcp.async_save in flight, exits 0 at once: the save ends
    (DCP's thread is joined first), the Runtime closes the checkpointer before MPI_Finalize, and the version
    is committed. Rank 0 runs it as a process of its own (a world of one); the others wait."""
    if rank == 0:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_"))}
        out = subprocess.run([sys.executable, "-c", _LEFT_OPEN, shared_dir], capture_output=True, text=True,
                             timeout=120, env=env)
        assert out.returncode == 0 and "leaving" in out.stdout, (out.returncode, out.stdout, out.stderr[-3000:])
        assert sorted(n.split("-s")[1] for n in os.listdir(shared_dir) if n.startswith("v")) == ["0", "1"]
    dist.barrier()
