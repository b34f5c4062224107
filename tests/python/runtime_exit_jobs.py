"""How a Python job of baton ends: each case is a job of its own (mpirun or a
lone process) launched from here with a bound on time, because what is
tested is the job's exit (its status, its time, what it said).

Run by tests/python/runtime-exit.sh in one pytest process (not under mpirun:
the jobs start their own); the rows go where conftest.py writes them.

  * an uncaught exception on one rank ends the job with 1 within seconds,
    naming the rank and the exception, also after a committed save (which
    then restores); sys.exit(EXIT_REQUEUE) stays 75, sys.exit(0) stays 0;
  * a child forked after baton.Runtime() (os.fork returning normally, a
    multiprocessing 'fork' worker, subprocess with preexec_fn) exits;
  * at exit, an ArrayCheckpointer that alone holds its Runtime is closed
    without touching freed memory, and a save_async never waited for is
    committed.
"""
import os
import subprocess
import sys
import textwrap
import time

import pytest

BUILD = os.environ.get("BATON_BUILD_DIR")
HERE = os.path.dirname(os.path.abspath(__file__))
MPIRUN_RANKS = os.path.join(HERE, "..", "lib", "mpirun-ranks")
# The old way out of an uncaught exception: the raising rank waited in
# MPI_Finalize for min(collective_timeout, 60) s. The jobs' collective
# timeout is 60 s (as run-pytest's), so "within seconds" is well under it.
QUICK = 20


def job_env(extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_", "OPAL_"))}
    if BUILD is not None:
        env["PYTHONPATH"] = os.path.join(BUILD, "python") + os.pathsep + env.get("PYTHONPATH", "")
    env["BATON_COLLECTIVE_TIMEOUT"] = "60"
    env.update(extra or {})
    return env


def run_job(tmp_path, code, ranks, timeout=90, extra_env=None):
    """Runs `code` as a Python program on `ranks` ranks (0: one process without mpirun); returns
    (exit status, seconds, stdout + stderr)."""
    script = tmp_path / ("job%d.py" % len(list(tmp_path.glob("job*.py"))))
    script.write_text(textwrap.dedent(code))
    argv = [sys.executable, str(script)]
    if ranks > 0:
        argv = [MPIRUN_RANKS, str(ranks)] + argv
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, env=job_env(extra_env), cwd=str(tmp_path), capture_output=True, text=True,
                           timeout=timeout, start_new_session=True)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
        pytest.fail("the job did not end within %d s:\n%s" % (timeout, out[-3000:]))
    return p.returncode, time.monotonic() - t0, p.stdout + p.stderr


@pytest.fixture(autouse=True)
def _built():
    if BUILD is None:
        pytest.fail("BATON_BUILD_DIR is not set (tests/python/runtime-exit.sh sets it)")


# ---- item 2: an uncaught exception ends the job with 1, at once --------------------------

def test_uncaught_exception_on_one_rank_ends_the_job_with_1(tmp_path):
    rc, seconds, out = run_job(tmp_path, """
        import baton
        rt = baton.Runtime()
        if rt.rank == 1:
            raise ValueError("bad batch shape (on purpose)")
        while True:
            rt.should_stop()   # the others sit in the next collective
    """, ranks=3)
    assert rc == 1, "exit %d after %.1f s (75 is the old requeue):\n%s" % (rc, seconds, out[-3000:])
    assert seconds < QUICK, "the job took %.1f s to end:\n%s" % (seconds, out[-3000:])
    assert "baton rank 1 on " in out and "uncaught ValueError: bad batch shape (on purpose)" in out, out[-3000:]
    assert "Traceback" in out, out[-3000:]


def test_uncaught_exception_after_a_save_ends_the_job_and_the_save_restores(tmp_path):
    ckpt = tmp_path / "ckpt"
    rc, seconds, out = run_job(tmp_path, """
        import numpy as np
        import baton
        rt = baton.Runtime()
        ck = baton.ArrayCheckpointer(rt, dir=%r)
        w = np.arange(64, dtype=np.float32)
        ck.register_replicated("w", w)
        ck.save(1)
        if rt.rank == 2:
            raise RuntimeError("loss is NaN (on purpose)")
        w += 1
        ck.save(2)            # the others wait for rank 2 here
    """ % str(ckpt), ranks=3)
    assert rc == 1 and seconds < QUICK, "exit %d after %.1f s:\n%s" % (rc, seconds, out[-3000:])
    assert "baton rank 2 on " in out and "uncaught RuntimeError: loss is NaN (on purpose)" in out, out[-3000:]
    rc, _, out = run_job(tmp_path, """
        import numpy as np
        import baton
        with baton.Runtime() as rt:
            ck = baton.ArrayCheckpointer(rt, dir=%r)
            w = np.zeros(64, dtype=np.float32)
            ck.register_replicated("w", w)
            print("restored", ck.restore(), float(w.sum()))
            ck.close()
    """ % str(ckpt), ranks=0)
    assert rc == 0 and "restored 1 %s" % float(sum(range(64))) in out, out[-3000:]


def _rank_lines(out, rank):
    tag = "[rank%d]: " % rank
    return [line[len(tag):] for line in out.splitlines() if line.startswith(tag)]


def test_traceback_reaches_stderr_under_torchs_hook_wrapper_and_a_second_runtime(tmp_path):
    """torch.distributed.init_process_group wraps sys.excepthook and sends stderr into a buffer
    while the hook before it runs; baton's hook never returns (MPI_Abort), so the traceback was
    lost. A second Runtime installed the hook again under torch's wrapper: it recursed."""
    pytest.importorskip("torch", reason="PyTorch is not installed for this interpreter (scripts/install-deps "
                                        "--with-torch)")
    rc, seconds, out = run_job(tmp_path, """
        import baton
        rt = baton.Runtime()
        baton.init_process_group(rt)
        second = baton.Runtime()   # as a storage writer without runtime= makes one
        def deep(n):
            if n == 0:
                raise ValueError("bad batch shape (on purpose)")
            deep(n - 1)
        if rt.rank == 1:
            deep(3)
        while True:
            rt.should_stop()
    """, ranks=2, extra_env={"GLOO_SOCKET_IFNAME": "lo"})
    assert rc == 1 and seconds < QUICK, "exit %d after %.1f s:\n%s" % (rc, seconds, out[-3000:])
    lines = _rank_lines(out, 1)
    assert lines.count("Traceback (most recent call last):") == 1, out[-3000:]
    assert "ValueError: bad batch shape (on purpose)" in lines, out[-3000:]
    assert sum('in deep' in line for line in lines) == 4, out[-3000:]
    assert any(line.startswith("baton rank 1 on ") for line in lines), out[-3000:]
    assert "RecursionError" not in out and "maximum recursion" not in out, out[-3000:]


def test_a_base_exception_subclass_prints_its_traceback_and_ends_the_job(tmp_path):
    """DCP's CheckpointException is a BaseException: it reaches the hook like any other."""
    rc, seconds, out = run_job(tmp_path, """
        import baton
        class CheckpointException(BaseException):
            pass
        rt = baton.Runtime()
        if rt.rank == 0:
            raise CheckpointException("rank 0 could not read (on purpose)")
        while True:
            rt.should_stop()
    """, ranks=2)
    assert rc == 1 and seconds < QUICK, "exit %d after %.1f s:\n%s" % (rc, seconds, out[-3000:])
    lines = _rank_lines(out, 0)
    assert "Traceback (most recent call last):" in lines, out[-3000:]
    assert any(line.endswith("CheckpointException: rank 0 could not read (on purpose)") for line in lines), out[-3000:]


def test_the_programs_own_hook_runs_and_its_text_is_prefixed(tmp_path):
    rc, seconds, out = run_job(tmp_path, """
        import sys
        def mine(kind, value, tb):
            sys.stderr.write("my hook saw %s\\n" % kind.__name__)
        sys.excepthook = mine
        import baton
        rt = baton.Runtime()
        if rt.rank == 1:
            raise KeyError("on purpose")
        while True:
            rt.should_stop()
    """, ranks=2)
    assert rc == 1 and seconds < QUICK, "exit %d after %.1f s:\n%s" % (rc, seconds, out[-3000:])
    assert "my hook saw KeyError" in _rank_lines(out, 1), out[-3000:]


def test_requeue_exit_stays_75_and_a_clean_exit_0(tmp_path):
    code = """
        import sys
        import baton
        rt = baton.Runtime()
        rt.should_stop()
        sys.exit(%s)
    """
    rc, seconds, out = run_job(tmp_path, code % "baton.EXIT_REQUEUE", ranks=3)
    assert rc == 75 and seconds < QUICK, "exit %d after %.1f s:\n%s" % (rc, seconds, out[-3000:])
    assert "uncaught" not in out, out[-3000:]
    rc, seconds, out = run_job(tmp_path, code % "0", ranks=3)
    assert rc == 0 and seconds < QUICK, "exit %d after %.1f s:\n%s" % (rc, seconds, out[-3000:])


def test_a_rank_that_exits_alone_with_a_save_in_flight_ends_with_its_status(tmp_path):
    """Exit commits a save in flight only when every rank closes: a rank that leaves alone (the
    others still training) gives up after collective_timeout (10 s here), abandons the save, says
    so, and ends with its own status; never waits for ever."""
    rc, seconds, out = run_job(tmp_path, """
        import sys, time
        import numpy as np
        import baton
        rt = baton.Runtime()
        ck = baton.ArrayCheckpointer(rt, dir=%r)
        w = np.arange(1 << 16, dtype=np.float32)
        ck.register_replicated("w", w)
        ck.save_async(1)
        if rt.rank == 0:
            sys.exit(3)
        time.sleep(600)       # a long step elsewhere
    """ % str(tmp_path / "ckpt"), ranks=2, extra_env={"BATON_COLLECTIVE_TIMEOUT": "10"})
    assert rc == 3 and seconds < 60, "exit %d after %.1f s:\n%s" % (rc, seconds, out[-3000:])
    assert "close(): committing save_async(1) (not committed; abandoned): waiting for every rank to close" in out, \
        out[-3000:]


# ---- item 4: a child forked after baton.Runtime() exits ----------------------------------

FORK_PRELUDE = """
    import os, sys, time, multiprocessing, subprocess
    import numpy as np
    import baton
    rt = baton.Runtime()
    ck = baton.ArrayCheckpointer(rt, dir=%r)
    w = np.arange(1 << 16, dtype=np.float32)
    ck.register_replicated("w", w)
    ck.save_async(1)          # a writer thread in flight in the parent when it forks

    def reap(pid, what, bound=20):
        deadline = time.monotonic() + bound
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                print(what, "exit", os.waitstatus_to_exitcode(status), flush=True)
                return
            time.sleep(0.05)
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        print(what, "HUNG: killed after", bound, "s", flush=True)
"""


def test_a_forked_child_that_returns_normally_exits(tmp_path):
    rc, _, out = run_job(tmp_path, FORK_PRELUDE % str(tmp_path / "ckpt") + """
    pid = os.fork()
    if pid == 0:
        # The child leaves the script as any program does: atexit, then the
        # objects' destructors (the Runtime's, the checkpointer's).
        raise SystemExit(0)
    reap(pid, "os.fork child")
    ck.wait()
    ck.save(2)                # the parent's runtime and checkpointer still work
    ck.close()
    rt.close()
    print("parent done", flush=True)
    """, ranks=0)
    assert rc == 0 and "os.fork child exit 0" in out and "parent done" in out, out[-3000:]


def test_sigterm_ends_a_forked_child(tmp_path):
    """baton's SIGTERM handler (the agreed stop) is the parent's: a forked child dies of SIGTERM, as
    multiprocessing's Pool.terminate() and a DataLoader's shutdown expect (with the handler inherited
    it only set a flag, and Pool.terminate() waited for ever, now and then)."""
    rc, _, out = run_job(tmp_path, FORK_PRELUDE % str(tmp_path / "ckpt") + """
    import signal
    pid = os.fork()
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    time.sleep(0.5)
    os.kill(pid, signal.SIGTERM)
    reap(pid, "sleeping child")
    ck.close()
    print("parent done", flush=True)
    """, ranks=0)
    assert rc == 0 and "sleeping child exit -15" in out and "parent done" in out, out[-3000:]


def test_a_multiprocessing_fork_worker_and_a_preexec_child_exit(tmp_path):
    rc, _, out = run_job(tmp_path, FORK_PRELUDE % str(tmp_path / "ckpt") + """
    def work(q):
        q.put(sum(range(10)))

    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=work, args=(q,))
    p.start()
    p.join(20)
    if p.is_alive():
        p.kill()
        print("multiprocessing worker HUNG", flush=True)
    else:
        print("multiprocessing worker exit", p.exitcode, q.get(timeout=5), flush=True)
    with ctx.Pool(2) as pool:
        print("pool", pool.map(abs, [-1, -2, -3]), flush=True)
    r = subprocess.run(["true"], preexec_fn=lambda: None, timeout=20)
    print("preexec child exit", r.returncode, flush=True)
    ck.close()
    print("parent done", flush=True)
    """, ranks=0)
    assert rc == 0, out[-3000:]
    for line in ("multiprocessing worker exit 0 45", "pool [1, 2, 3]", "preexec child exit 0", "parent done"):
        assert line in out, out[-3000:]


def test_torch_dataloader_fork_workers_exit(tmp_path):
    pytest.importorskip("torch", reason="PyTorch is not installed for this interpreter (scripts/install-deps "
                                        "--with-torch)")
    rc, seconds, out = run_job(tmp_path, FORK_PRELUDE % str(tmp_path / "ckpt") + """
    import torch
    from torch.utils.data import DataLoader
    data = torch.arange(64, dtype=torch.float32)
    for epoch in range(2):   # workers made and ended twice
        loader = DataLoader(data, batch_size=8, num_workers=2, multiprocessing_context="fork")
        print("epoch", epoch, float(sum(b.sum() for b in loader)), flush=True)
        del loader
    ck.close()
    print("parent done", flush=True)
    """, ranks=0, timeout=120)
    assert rc == 0 and "epoch 1 2016.0" in out and "parent done" in out, "exit %d after %.1f s:\n%s" % (
        rc, seconds, out[-3000:])


def test_an_exception_in_a_forked_child_ends_only_the_child(tmp_path):
    """The hook a child inherits is not baton's: a child's exception must not MPI_Abort the parent's job."""
    rc, _, out = run_job(tmp_path, FORK_PRELUDE % str(tmp_path / "ckpt") + """
    pid = os.fork()
    if pid == 0:
        raise KeyError("child's own failure (on purpose)")
    reap(pid, "raising child")
    ck.close()
    print("parent done", flush=True)
    """, ranks=0)
    assert rc == 0 and "raising child exit 1" in out and "parent done" in out, out[-3000:]
    assert "KeyError" in out and "baton rank" not in out, out[-3000:]


# ---- item 11: exit with a checkpointer that alone holds its Runtime ----------------------

def test_exit_with_a_checkpointer_that_alone_holds_the_runtime(tmp_path):
    """At exit the Runtime closes its checkpointer, which drops the last reference to the Runtime:
    the Runtime must not be used after that (it was: PyRuntime::Close went on in freed memory).
    MALLOC_PERTURB_ fills freed memory, so that a use after free crashes instead of passing."""
    rc, _, out = run_job(tmp_path, """
        import numpy as np
        import baton
        ck = baton.ArrayCheckpointer(baton.Runtime(), dir=%r)
        w = np.ones(16, dtype=np.float64)
        ck.register_replicated("w", w)
        ck.save(1)
        print("leaving", flush=True)
    """ % str(tmp_path / "ckpt"), ranks=0, extra_env={"MALLOC_PERTURB_": "165"})
    assert rc == 0 and "leaving" in out, "exit %d:\n%s" % (rc, out[-3000:])


# ---- item 13: a save_async never waited for is committed at exit -------------------------

def test_exit_commits_a_save_async_never_waited_for(tmp_path):
    ckpt = str(tmp_path / "ckpt")
    rc, seconds, out = run_job(tmp_path, """
        import numpy as np
        import baton
        rt = baton.Runtime()
        ck = baton.ArrayCheckpointer(rt, dir=%r)
        w = np.arange(1 << 20, dtype=np.float32) + rt.rank
        ck.register_sharded("w", w, offset=rt.rank * w.size, global_shape=(rt.size * w.size,))
        ck.save_async(7)
        print("leaving with the save in flight", flush=True)
    """ % ckpt, ranks=3)
    assert rc == 0 and seconds < QUICK, "exit %d after %.1f s:\n%s" % (rc, seconds, out[-3000:])
    rc, _, out = run_job(tmp_path, """
        import numpy as np
        import baton
        with baton.Runtime() as rt:
            ck = baton.ArrayCheckpointer(rt, dir=%r)
            w = np.zeros(3 << 20, dtype=np.float32)
            ck.register_sharded("w", w, offset=0)
            step = ck.restore()
            expected = np.concatenate([np.arange(1 << 20, dtype=np.float32) + r for r in range(3)])
            print("restored", step, bool((w == expected).all()))
    """ % ckpt, ranks=0)
    assert rc == 0 and "restored 7 True" in out, out[-3000:]


# ---- issue 47 item 3: at another world size the per-rank state is dropped, or refused -------

_RESIZE_JOB = """
    import os, sys, warnings
    import numpy as np
    import baton
    rt = baton.Runtime()
    ck = baton.Checkpointer(rt, dir=%r)
    w = np.zeros(4)
    state = {"w": w, "rng": baton.RNGState(), "cursor": baton.PerRank({"pos": 0})}
    if sys.argv[1:] == ["save"]:
        w += 5
        state["cursor"].obj["pos"] = 10 + rt.rank
        ck.save(state, 10)
    else:
        warnings.simplefilter("always")
        step = ck.restore(state, **({"drop_rank_state_on_resize": False} if sys.argv[1:] == ["refuse"] else {}))
        print("rank %%d restored step %%s w=%%s pos=%%d" %% (rt.rank, step, w[0], state["cursor"].obj["pos"]), flush=True)
"""


def _events(ckpt):
    names = sorted(os.listdir(os.path.join(ckpt, "events")))
    return "".join(open(os.path.join(ckpt, "events", n)).read() for n in names if n.startswith("local-r"))


def test_at_fewer_ranks_the_per_rank_state_is_dropped_with_a_warning_and_a_refusal_exits_75(tmp_path):
    ckpt = str(tmp_path / "ckpt")
    script = tmp_path / "resize.py"
    script.write_text(textwrap.dedent(_RESIZE_JOB % ckpt))

    def run(ranks, *args):
        argv = [sys.executable, str(script), *args]
        if ranks > 0:
            argv = [MPIRUN_RANKS, str(ranks)] + argv
        p = subprocess.run(argv, env=job_env(), cwd=str(tmp_path), capture_output=True, text=True, timeout=90,
                           start_new_session=True)
        return p.returncode, p.stdout + p.stderr

    rc, out = run(3, "save")
    assert rc == 0, out[-3000:]
    # Asked to refuse: every rank exits 75 (baton.ResizeRefused, a SystemExit), nothing restored,
    # a "refused ..." failure record per rank and no "uncaught ..." one: `baton run` requeues the
    # job naming the refusal, never as a bug.
    rc, out = run(2, "refuse")
    assert rc == 75, "exit %d:\n%s" % (rc, out[-3000:])
    assert "restored step" not in out, out[-3000:]
    assert ("refused to go on at 2 ranks: step 10 was saved by 3 ranks and the state's per-rank state "
            "('rng', 'cursor')") in out, out[-3000:]
    events = _events(ckpt)
    assert events.count('"what":"refused to go on at 2 ranks') == 2, events[-3000:]
    assert events.count('"kind":"refused"') == 2, events[-3000:]  # what `baton run` decides by
    assert '"what":"uncaught ' not in events, events[-3000:]
    # The default at 1 and 2 ranks: the replicated state is restored, the per-rank state keeps this
    # run's values, and rank 0 (only) warns naming it.
    for ranks in (2, 0):
        rc, out = run(ranks)
        assert rc == 0, "exit %d at %d rank(s):\n%s" % (rc, ranks, out[-3000:])
        n = max(ranks, 1)
        for r in range(n):
            assert "rank %d restored step 10 w=5.0 pos=0" % r in out, out[-3000:]
        assert out.count("RuntimeWarning: baton: step 10 was saved by 3 ranks and restores at %d: the per-rank "
                         "state ('rng', 'cursor') is not restored" % n) == 1, out[-3000:]
