"""torchrun and baton (docs/python.md, "torchrun"): torchrun starts its workers
as plain processes, not MPI processes, so each would be rank 0 of a world of
one; baton.Runtime() refuses them before MPI_Init, in one line that names
the launchers to use instead. Real torchrun (torch.distributed.run), 2
workers, outside any MPI job.

Run by tests/python/torchrun.sh in one pytest process.
"""
import os
import subprocess
import sys
import textwrap
import time

import pytest

pytest.importorskip("torch.distributed.run")

PROGRAM = """
    import sys
    import baton
    rt = baton.Runtime()
    # One write per line: print's pieces are separate writes where stdout is unbuffered
    # (PYTHONUNBUFFERED), and mpirun forwards the two ranks' pieces interleaved.
    sys.stdout.write("rank %d of %d started\\n" % (rt.rank, rt.size))
    sys.stdout.flush()
"""


def _env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_", "OPAL_", "SLURM_"))}
    env["BATON_COLLECTIVE_TIMEOUT"] = "30"
    return env


def test_torchrun_is_refused_at_once_in_one_line_naming_the_launchers(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(PROGRAM))
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        "--max-restarts", "0", str(script)], env=_env(), cwd=str(tmp_path), capture_output=True,
                       text=True, timeout=90, start_new_session=True)
    seconds = time.monotonic() - t0
    out = p.stdout + p.stderr
    assert p.returncode != 0, out[-3000:]
    assert "started" not in p.stdout, out[-3000:]
    lines = [ln for ln in out.splitlines() if "started by torchrun (TORCHELASTIC_RUN_ID=" in ln]
    assert lines, out[-3000:]
    for want in ("baton run python train.py", "srun --baton python train.py", "mpirun -n N python train.py"):
        assert want in lines[0], lines[0]
    assert seconds < 60, "torchrun took %.1f s to end:\n%s" % (seconds, out[-3000:])


def test_the_same_program_under_mpirun_runs():
    """What the refusal tells the user to do works (a world of 2; the refusal is torchrun's alone)."""
    here = os.path.dirname(os.path.abspath(__file__))
    p = subprocess.run([os.path.join(here, "..", "lib", "mpirun-ranks"), "2", sys.executable, "-c",
                        textwrap.dedent(PROGRAM)], env=_env(), capture_output=True, text=True, timeout=90,
                       start_new_session=True)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert sorted(ln for ln in p.stdout.splitlines() if ln.endswith(" started")) == [
        "rank 0 of 2 started", "rank 1 of 2 started"], p.stdout
