"""An ArrayCheckpointer's life: one per directory in a process (a second is
refused at once), and its end (close(), a with block) commits the
save_async in flight instead of abandoning it."""
import os
import time

import numpy as np
import pytest

from baton import _baton


def sharded(rt, n=1 << 18, fill=0):
    return np.arange(n, dtype=np.float32) + 1000 * rt.rank + fill


def register(ck, rt, a):
    ck.register_sharded("a", a, offset=rt.rank * a.size, global_shape=(rt.size * a.size,))


def restored(rt, directory, n=1 << 18):
    ck = _baton.ArrayCheckpointer(rt, dir=directory)
    a = np.zeros(n, dtype=np.float32)
    register(ck, rt, a)
    step = ck.restore()
    ck.close()
    return step, a


def test_close_commits_a_save_async_never_waited_for(rt, shared_dir):
    ck = _baton.ArrayCheckpointer(rt, dir=shared_dir)
    a = sharded(rt)
    register(ck, rt, a)
    ck.save_async(3)
    ck.close()  # every rank: collective here
    step, b = restored(rt, shared_dir)
    assert step == 3
    np.testing.assert_array_equal(b, sharded(rt))


def test_the_end_of_a_with_block_commits_a_save_async(rt, shared_dir):
    with _baton.ArrayCheckpointer(rt, dir=shared_dir) as ck:
        a = sharded(rt, fill=1)
        register(ck, rt, a)
        ck.save(1)
        ck.save_async(2)
        a += 5  # after save_async returned: not in version 2
    step, b = restored(rt, shared_dir)
    assert step == 2
    np.testing.assert_array_equal(b, sharded(rt, fill=1))


def test_runtime_close_commits_its_checkpointers_save_async(shared_dir):
    rt = _baton.Runtime()
    ck = _baton.ArrayCheckpointer(rt, dir=shared_dir)
    a = sharded(rt, fill=2)
    register(ck, rt, a)
    ck.save_async(5)
    rt.close()
    assert ck.closed
    rt = _baton.Runtime()
    expected = sharded(rt, fill=2)
    step, b = restored(rt, shared_dir)
    rt.close()
    assert step == 5
    np.testing.assert_array_equal(b, expected)


def test_a_second_checkpointer_on_a_held_directory_is_refused_at_once(rt, shared_dir):
    first = _baton.ArrayCheckpointer(rt, dir=shared_dir)
    t0 = time.monotonic()
    with pytest.raises(_baton.Unavailable) as e:
        _baton.ArrayCheckpointer(rt, dir=os.path.join(shared_dir, "."))  # another spelling of it
    seconds = time.monotonic() - t0
    assert seconds < 5, "refused after %.1f s (the writer lock's wait is 120 s)" % seconds
    text = str(e.value)
    assert os.path.realpath(shared_dir) in text and "this process" in text, text
    first.close()
    again = _baton.ArrayCheckpointer(rt, dir=shared_dir)  # once closed, the directory is free
    again.close()


def test_a_second_checkpointer_through_baton_ckpt_dir_is_refused_at_once(rt, shared_dir, monkeypatch):
    monkeypatch.setenv("BATON_CKPT_DIR", shared_dir)
    first = _baton.ArrayCheckpointer(rt)
    with pytest.raises(_baton.Unavailable, match="this process"):
        _baton.ArrayCheckpointer(rt, dir=shared_dir)
    first.close()


def test_an_exception_leaving_a_with_block_abandons_the_save_instead_of_waiting(rt, shared_dir):
    """The other ranks of a real job are elsewhere while one rank's exception unwinds: a commit
    (collective) would wait for them, so the save in flight is abandoned and the exception goes on."""
    t0 = time.monotonic()
    with pytest.raises(KeyError, match="on purpose"):
        with _baton.ArrayCheckpointer(rt, dir=shared_dir) as ck:
            a = sharded(rt)
            register(ck, rt, a)
            ck.save_async(4)
            raise KeyError("on purpose")
    assert ck.closed
    assert time.monotonic() - t0 < 30
    step, _ = restored(rt, shared_dir)
    assert step is None


def test_the_state_dict_checkpointer_commits_at_the_end_of_its_with_block(rt, shared_dir):
    """baton.Checkpointer's with block ends through the extension's: a clean end commits the
    save_async, an exception leaving it abandons the save and goes on."""
    import baton
    state = {"w": np.arange(64, dtype=np.float64), "epoch": 3}
    with baton.Checkpointer(rt, dir=shared_dir) as ck:
        ck.save_async(state, 6)
    with pytest.raises(ValueError, match="on purpose"):
        with baton.Checkpointer(rt, dir=shared_dir) as ck:
            state["w"] += 1
            ck.save_async(state, 7)
            raise ValueError("on purpose")
    back = {"w": np.zeros(64, dtype=np.float64), "epoch": 0}
    with baton.Checkpointer(rt, dir=shared_dir) as ck:
        assert ck.restore(back) == 6
    np.testing.assert_array_equal(back["w"], np.arange(64, dtype=np.float64))
    assert back["epoch"] == 3


def test_a_reopen_that_failed_while_the_storage_was_away_is_retried_by_the_next_call(rt, shared_dir):
    """Issue 46 item 7: before, the failed reopen left the Checkpointer closed for good ("ArrayCheckpointer is
    closed" at every later call)."""
    import baton
    d = os.path.join(shared_dir, "ckpt")
    w, b = np.arange(6, dtype=np.float32), np.ones(3, dtype=np.float32)
    ck = baton.Checkpointer(rt, dir=d, level2=False)
    ck.save({"w": w, "b": b}, 1)

    def barrier():
        _baton._allgather_bytes(rt, b"", "the test's barrier")

    # The storage goes away: the directory's path is a file for a moment (on rank 0; the ranks share it).
    barrier()
    if rt.rank == 0:
        os.rename(d, d + ".away")
        open(d, "w").close()
    barrier()
    with pytest.raises(baton.Error, match="reopening the checkpoint directory"):
        ck.save({"w": w}, 2)  # "b" left the state: the registrations are dropped by a reopen
    barrier()
    if rt.rank == 0:
        os.remove(d)
        os.rename(d + ".away", d)
    barrier()
    ck.save({"w": w}, 2)  # the reopen again, now that the storage is back
    back = {"w": np.zeros(6, dtype=np.float32)}
    assert ck.restore(back) == 2
    np.testing.assert_array_equal(back["w"], w)
    ck.close()
