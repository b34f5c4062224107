"""Ranks that differ from each other, one job per case (run by test_plan_agreement.py).

    mpirun -n 2 python plan_cases.py CASE DIR

Each case makes the ranks behave differently on purpose (another key, dtype
or step on rank 1, a rank that skips a save and sleeps, a rank that closed
its Runtime). Every rank prints "rank R: ok ..." lines as it gets what the
case requires; an assertion that fails ends the rank with a traceback and
exit 1. The test runs the job under a time bound: a case that would hang
fails it within a minute.
"""

import os
import sys
import time

import numpy as np

import baton


def say(rt, text):
    print(f"rank {rt.rank}: ok {text}", flush=True)


def expect_invalid(rt, call, *needles):
    try:
        call()
    except baton.InvalidArgument as e:
        text = str(e)
        for needle in needles:
            assert needle in text, f"{needle!r} not in {text!r}"
        return text
    raise AssertionError("no InvalidArgument")


def differences(rt, directory):
    """Item 1 and 5: keys, dtypes, steps and walk errors that differ refuse the call on every rank, no hang."""
    ck = baton.Checkpointer(rt, dir=directory, level2=False)
    w, b = np.arange(6, dtype=np.float32), np.ones(3, dtype=np.float32)
    ck.save({"w": w, "b": b}, 1)

    # A key renamed on rank 1 only: every rank raises the same, naming the paths and the ranks.
    state = {"w": w, "b2" if rt.rank == 1 else "b": b}
    text = expect_invalid(rt, lambda: ck.save(state, 2), "'b': rank 0: replicated f32 (3,); rank 1: absent",
                          "'b2': rank 0: absent; rank 1: replicated f32 (3,)")
    say(rt, "renamed key refused on every rank: " + text.splitlines()[1].strip())
    # Retried with the state fixed: saves.
    ck.save({"w": w, "b": b}, 2)
    say(rt, "the fixed state saves")
    # The same difference at a restore.
    expect_invalid(rt, lambda: ck.restore(state), "'b2': rank 0: absent; rank 1: replicated f32 (3,)")
    say(rt, "renamed key refused by restore on every rank")

    # Item 5: a save refused for a dtype that differs leaves nothing behind: a restore of identical states works.
    other = np.ones(3, dtype=np.float64 if rt.rank == 1 else np.float32)
    expect_invalid(rt, lambda: ck.save({"w": w, "b": other}, 3), "'b': rank 0: replicated f32 (3,); "
                                                                "rank 1: replicated f64 (3,)")
    w2, b2 = np.zeros(6, dtype=np.float32), np.zeros(3, dtype=np.float32)
    assert ck.restore({"w": w2, "b": b2}) == 2
    assert np.array_equal(w2, w) and np.array_equal(b2, b)
    say(rt, "a refused save leaves the checkpointer whole")

    # A leaf that cannot be kept on rank 1 only: its TypeError there, the same refusal naming it everywhere else.
    bad = {"w": w, "b": b, "hook": (lambda: 1) if rt.rank == 1 else None}
    try:
        ck.save(bad, 4)
        raise AssertionError("saved")
    except TypeError as e:
        assert rt.rank == 1 and "cannot keep 'hook'" in str(e), e
    except baton.InvalidArgument as e:
        assert rt.rank == 0 and "rank 1 could not make the plan: TypeError" in str(e), e
    say(rt, "a walk error on one rank is an error on every rank")

    # Steps that differ.
    expect_invalid(rt, lambda: ck.save({"w": w, "b": b}, 5 + rt.rank), "the call differs: rank 0: save(5); "
                                                                       "rank 1: save(6)")
    say(rt, "steps that differ are refused")
    ck.save({"w": w, "b": b}, 7)
    assert ck.restore({"w": w2, "b": b2}) == 7
    say(rt, "saves and restores after every refusal")
    ck.close()


def skip_and_sleep(rt, directory):
    """Item 3: a rank that skips a save and sleeps: the others exit 75 at the collective deadline."""
    ck = baton.Checkpointer(rt, dir=directory, level2=False)
    w = np.arange(6, dtype=np.float32)
    ck.save({"w": w}, 1)
    say(rt, "first save")
    if rt.rank == 1:
        time.sleep(120)
        return
    t0 = time.monotonic()
    try:
        ck.save({"w": w}, 2)
    finally:
        print(f"rank {rt.rank}: save returned after {time.monotonic() - t0:.1f} s", flush=True)


def closed_runtime(rt, directory):
    """Item 3: a rank that closed its Runtime: its own save is an error, the others exit 75 at the deadline."""
    ck = baton.Checkpointer(rt, dir=directory, level2=False)
    w = np.arange(6, dtype=np.float32)
    ck.save({"w": w}, 1)
    if rt.rank == 1:
        rank = rt.rank
        rt.close()
        try:
            ck.save({"w": w}, 2)
            raise AssertionError("saved on a closed Runtime")
        except baton.Error as e:
            print(f"rank {rank}: ok save on a closed Runtime: {type(e).__name__}: {e}", flush=True)
        time.sleep(120)
        return
    ck.save({"w": w}, 2)


class _Cursor:
    """A loader cursor whose state is this rank's own (baton.PerRank)."""

    def __init__(self, text):
        self.text = text

    def state_dict(self):
        return {"text": self.text}

    def load_state_dict(self, state):
        self.text = state["text"]


def local_steps(rt, directory):
    """Issue 46 item 5: a rank-local step that fails on one rank after the plan was agreed fails every rank at once.

    Run with BATON_COLLECTIVE_TIMEOUT=10: before, the other rank waited in
    the collective read or write (over 100 s); now each refusal takes well
    under the deadline, names rank 1 and its cause, and the checkpointer
    goes on.
    """
    ck = baton.Checkpointer(rt, dir=directory, level2=False)
    w = np.arange(6, dtype=np.float32)
    ck.save({"w": w, "lr": 0.5}, 1)

    # restore(strict=True): rank 1's state has a plain key the checkpoint lacks (plain values are outside the
    # agreed plan of tensors): its match fails there alone.
    state = {"w": np.zeros(6, dtype=np.float32), "lr": 0.0}
    if rt.rank == 1:
        state["extra"] = 3
    t0 = time.monotonic()
    try:
        ck.restore(state)
        raise AssertionError("restored")
    except baton.InvalidArgument as e:
        assert "'extra'" in str(e), e
        assert rt.rank == 1 or "rank 1 could not make the plan" in str(e), e
    took = time.monotonic() - t0
    assert took < 5, f"{took:.1f} s"
    assert not state["w"].any(), "a refused restore wrote into the state"
    say(rt, f"a plain key on one rank refuses the strict restore on every rank ({took:.1f} s)")

    # A per-rank state over the extension's 64 MiB on rank 1 only: refused before the collective write.
    cursor = _Cursor("x" * ((65 << 20) if rt.rank == 1 else 10))
    t0 = time.monotonic()
    try:
        ck.save({"w": w, "cursor": baton.PerRank(cursor)}, 2)
        raise AssertionError("saved")
    except baton.Error as e:
        assert ("64 MiB" in str(e)) if rt.rank == 1 else ("rank 1 could not make the plan" in str(e)), e
    took = time.monotonic() - t0
    assert took < 5, f"{took:.1f} s"
    say(rt, f"a per-rank state over 64 MiB on one rank refuses the save on every rank ({took:.1f} s)")

    cursor.text = "y"
    ck.save({"w": w, "cursor": baton.PerRank(cursor)}, 2)
    back = {"w": np.zeros(6, dtype=np.float32), "cursor": baton.PerRank(_Cursor(""))}
    assert ck.restore(back) == 2 and np.array_equal(back["w"], w)
    say(rt, "saves and restores after both refusals")
    ck.close()


CASES = {"local_steps": local_steps, "differences": differences, "skip_and_sleep": skip_and_sleep, "closed_runtime": closed_runtime}

if __name__ == "__main__":
    case, directory = sys.argv[1], sys.argv[2]
    rt = baton.Runtime()
    CASES[case](rt, os.path.join(directory, case))
    print(f"rank {rt.rank}: done", flush=True)
