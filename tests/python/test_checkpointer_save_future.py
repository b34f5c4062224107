"""Checkpointer.save_async's SaveFuture (issue 46 item 6): it tells writing, committed and failed apart.

A wait(timeout) that timed out leaves the save in flight (its future says
"writing" or "written", a later wait() commits it); a commit that failed
reads "failed" and its wait() raises the failure, never "done".
"""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import baton  # noqa: E402  (after the torch check)


def test_a_wait_that_timed_out_leaves_the_save_in_flight_until_a_wait_commits_it(rt, shared_dir):
    t = torch.arange(1 << 24, dtype=torch.float32)  # 64 MiB: written well after save_async returned
    ck = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    fut = ck.save_async({"t": t}, 1)
    with pytest.raises(baton.TimeoutError):
        fut.wait(timeout=0)
    # Before: "done", and the next wait() returned without committing (async_status stayed "written").
    assert fut.status() in ("writing", "written")
    fut.wait()
    assert fut.status() == "committed" and ck.async_status() == "idle"
    assert ck.read_metadata()["step"] == 1
    ck.close()


def test_a_save_that_a_later_call_completed_reads_committed(rt, shared_dir):
    t = torch.arange(8, dtype=torch.float32)
    ck = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    fut = ck.save_async({"t": t}, 1)
    assert ck.restore({"t": torch.zeros(8)}) == 1  # completes the save in flight first
    assert fut.status() == "committed"
    fut.wait()
    ck.close()


def test_a_save_abandoned_by_an_exception_leaving_the_with_block_reads_failed(rt, shared_dir):
    t = torch.arange(8, dtype=torch.float32)
    with pytest.raises(KeyError):
        with baton.Checkpointer(rt, dir=shared_dir, level2=False) as ck:
            fut = ck.save_async({"t": t}, 1)
            raise KeyError("the program's own error")
    assert fut.status() == "failed"
    with pytest.raises(baton.Aborted, match=r"save_async\(1\) was abandoned"):
        fut.wait()


FAILED_WRITE = """
import resource, signal, tempfile, torch, baton
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing
rt = baton.Runtime()
ck = baton.Checkpointer(rt, dir=tempfile.mkdtemp(), level2=False)
t = torch.arange(1 << 22, dtype=torch.float32)  # 16 MiB
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, hard))  # the shard file cannot grow past 1 MiB
fut = ck.save_async({"t": t}, 1)
try:
    fut.wait()
    print("committed?")
except baton.Error as e:
    print("raised:", type(e).__name__)
print("status:", fut.status())
try:
    fut.wait()
except baton.Error as e:
    print("raised again:", type(e).__name__)
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
ck.save({"t": t}, 2)
print("saved after:", ck.read_metadata()["step"])
ck.close()
print("closed", flush=True)
# Not through MPI_Finalize: HDF5 still holds the shard file whose H5Fclose failed (EFBIG) and crashes closing it
# there (SIGSEGV in H5F__close_cb, a synchronous save's failed write too): a defect of its own, not this test's.
import os
os._exit(0)
"""


def test_a_save_whose_write_failed_reads_failed_and_its_wait_raises(rank):
    """Before: "done". One process of its own (a file size limit, no MPI launch)."""
    if rank != 0:
        return  # one process is enough; rank 0 runs it
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_", "OPAL_"))}
    p = subprocess.run([sys.executable, "-c", FAILED_WRITE], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr[-3000:]}"
    assert "raised:" in p.stdout and "committed?" not in p.stdout, p.stdout
    assert "status: failed" in p.stdout and "raised again:" in p.stdout, p.stdout
    assert "saved after: 2" in p.stdout and "closed" in p.stdout, p.stdout
