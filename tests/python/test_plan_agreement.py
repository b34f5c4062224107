"""The agreed plan of a save or a restore (issue 41 items 1, 3, 5; issue 46 item 5): ranks that differ fail
together, in time.

The cases where ranks differ on purpose run as jobs of their own
(plan_cases.py, 2 ranks: no more ranks than this machine's cores) from the
np1 launch, each under a time bound: a job that would hang fails its test
within a minute. The np3 launch skips them (they need a job of their own).
"""

import os
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
MPIRUN_RANKS = os.path.join(HERE, "..", "lib", "mpirun-ranks")
SIZE = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
BOUND = 60  # seconds: a case that would hang fails within this


def run_case(case, directory, timeout, env_extra=None):
    """(exit status, output, seconds) of plan_cases.py CASE under mpirun with 2 ranks, killed past ``BOUND``."""
    if SIZE > 1:
        pytest.skip("starts a 2-rank job of its own: runs in the np1 launch")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_", "OPAL_"))}
    env["BATON_COLLECTIVE_TIMEOUT"] = str(timeout)
    env["BATON_LOCAL_DIR"] = os.path.join(directory, "local")
    env.update(env_extra or {})
    cmd = ["timeout", "-k", "5", str(BOUND), MPIRUN_RANKS, "2", sys.executable,
           os.path.join(HERE, "plan_cases.py"), case, directory]
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=BOUND + 30)
    took = time.monotonic() - t0
    out = p.stdout + p.stderr
    assert p.returncode not in (124, 137), f"{case}: the job hung (killed after {BOUND} s):\n{out[-4000:]}"
    return p.returncode, out, took


def test_ranks_whose_states_differ_fail_together_and_recover(shared_dir):
    rc, out, _ = run_case("differences", shared_dir, 30)
    assert rc == 0, out[-4000:]
    for rank in (0, 1):
        for what in ("renamed key refused on every rank", "the fixed state saves",
                     "renamed key refused by restore on every rank", "a refused save leaves the checkpointer whole",
                     "a walk error on one rank is an error on every rank", "steps that differ are refused",
                     "saves and restores after every refusal"):
            assert f"rank {rank}: ok {what}" in out, (rank, what, out[-4000:])
        assert f"rank {rank}: done" in out


def test_a_rank_that_skips_a_save_ends_the_job_at_the_collective_deadline(shared_dir):
    rc, out, took = run_case("skip_and_sleep", shared_dir, 5)
    assert "rank 0: ok first save" in out and "rank 1: ok first save" in out, out[-4000:]
    assert rc == 75, f"exit {rc}, not 75 (the runtime's collective deadline):\n{out[-4000:]}"
    assert "save: agreeing on the plan" in out and "timed out after 5 s" in out, out[-4000:]
    assert "rank 0: done" not in out
    assert took < 45, f"{took:.0f} s"


def test_a_rank_that_closed_its_runtime_ends_the_job_at_the_collective_deadline(shared_dir):
    rc, out, took = run_case("closed_runtime", shared_dir, 5)
    assert "rank 1: ok save on a closed Runtime: InvalidArgument" in out, out[-4000:]
    assert rc == 75, f"exit {rc}, not 75:\n{out[-4000:]}"
    assert "save: agreeing on the plan" in out and "timed out after 5 s" in out, out[-4000:]
    assert took < 45, f"{took:.0f} s"


def test_a_rank_local_step_that_fails_on_one_rank_fails_every_rank_before_the_deadline(shared_dir):
    """Issue 46 item 5: a strict restore's plain keys and a per-rank state over 64 MiB, on rank 1 only."""
    rc, out, took = run_case("local_steps", shared_dir, 10)
    assert rc == 0, f"exit {rc}:\n{out[-4000:]}"
    for rank in (0, 1):
        for what in ("a plain key on one rank refuses the strict restore on every rank",
                     "a per-rank state over 64 MiB on one rank refuses the save on every rank",
                     "saves and restores after both refusals"):
            assert f"rank {rank}: ok {what}" in out, (rank, what, out[-4000:])
    assert "timed out" not in out, out[-4000:]
