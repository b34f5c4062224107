"""What comes from outside while an ArrayCheckpointer call runs with the GIL
released: another Python thread (its getters are refused as its calls are,
instead of reading what the call is writing) and Ctrl-C (held until the save
ended: a KeyboardInterrupt out of save() says the version is committed)."""
import signal
import threading
import time

import numpy as np
import pytest

from baton import _baton

BIG = 1 << 24  # float32 elements per rank (64 MiB): a save that lasts long enough to be caught in


def big_checkpointer(rt, directory):
    ck = _baton.ArrayCheckpointer(rt, dir=directory)
    a = np.full(BIG, 1.0 + rt.rank, dtype=np.float32)
    ck.register_sharded("a", a, offset=rt.rank * BIG, global_shape=(rt.size * BIG,))
    return ck, a


GETTERS = {
    "rank_state": lambda ck: ck.rank_state,
    "user_blob": lambda ck: ck.user_blob,
    "last_stats": lambda ck: ck.last_stats(),
    "dir": lambda ck: ck.dir,
    "run_id": lambda ck: ck.run_id,
    "async_status": lambda ck: ck.async_status(),
}


def in_a_call(ck, bound=30):
    """Waits (with a bound) until another thread is inside a call of `ck`: a getter is refused then."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        try:
            ck.dir
        except _baton.Unavailable:
            return True
        time.sleep(0)
    return False


def test_getters_are_refused_while_another_thread_is_in_a_call(rt, shared_dir):
    ck, _ = big_checkpointer(rt, shared_dir)
    ck.rank_state = b"rank %d" % rt.rank
    failure = []

    def save():
        try:
            ck.save(1)
        except BaseException as e:  # noqa: B902: the thread's failure is the test's
            failure.append(e)

    worker = threading.Thread(target=save)
    worker.start()
    refused = {}
    while worker.is_alive():
        for name, get in GETTERS.items():
            try:
                get(ck)
            except _baton.Unavailable as e:
                refused[name] = str(e)
        time.sleep(0)
    worker.join()
    assert not failure, failure
    assert sorted(refused) == sorted(GETTERS), "not refused during the save: %s" % (set(GETTERS) - set(refused))
    for name, text in refused.items():
        assert name in text and "another thread is in a call" in text, text
    # Outside a call they answer.
    assert ck.rank_state == b"rank %d" % rt.rank and ck.last_stats()["step"] == 1 and ck.async_status() == "idle"
    ck.close()


def interrupted_rank(rt):
    return 1 if rt.size > 1 else 0


@pytest.mark.parametrize("call", ["save", "save_async+wait"])
def test_ctrl_c_during_a_save_comes_after_the_commit(rt, shared_dir, call):
    ck, _ = big_checkpointer(rt, shared_dir)
    if call == "save_async+wait":
        ck.save_async(1)
    main = threading.get_ident()
    sent = []

    def interrupt():
        if in_a_call(ck):
            sent.append(time.monotonic())
            signal.pthread_kill(main, signal.SIGINT)

    sender = threading.Thread(target=interrupt) if rt.rank == interrupted_rank(rt) else None
    t0 = time.monotonic()
    if sender is not None:
        sender.start()
    raised = None
    try:
        if call == "save":
            ck.save(1)
        else:
            ck.wait()
    except KeyboardInterrupt as e:
        raised = e
    t1 = time.monotonic()
    if sender is not None:
        sender.join()
        assert sent, "the sender never saw the %s in progress" % call
        assert t0 < sent[0] < t1
        assert raised is not None, "Ctrl-C during %s was lost" % call
        text = str(raised)
        assert "held until the call ended" in text and "version 1 is committed" in text, text
    else:
        assert raised is None
    meta = ck.read_metadata()  # collective: every rank sees the committed version
    assert meta is not None and meta["step"] == 1
    assert ck.async_status() == "idle"
    ck.close()
