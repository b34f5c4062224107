"""What baton.Runtime() sets up before MPI_Init in a fresh process: each case
is a job of its own (mpirun, 1 rank) launched from here, because what is
tested is the environment Open MPI's MPI_Init reads, set once per process.

Run by tests/python/runtime-start.sh in one pytest process (not under mpirun).

  * Open MPI's psm and psm2 transports are left out where the node has no
    TrueScale or Omni-Path adapter (mpi_runtime/open_mpi_mtl.h: loading
    their libraries cost 0.2 s of a 0.25 s MPI_Init, issue 47 item 10),
    extending the parameter files' value, never replacing it;
  * a value the user set, or an include list in the files, is left alone.
"""
import glob
import os

import pytest

from runtime_exit_jobs import BUILD, run_job

PRINT_MTL = """
    import ctypes
    import baton
    rt = baton.Runtime()
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    v = libc.getenv(b"OMPI_MCA_mtl")
    print("mtl=%s" % (v.decode() if v is not None else "unset"), flush=True)
    rt.close()
"""


@pytest.fixture(autouse=True)
def _built():
    if BUILD is None:
        pytest.fail("BATON_BUILD_DIR is not set (tests/python/runtime-start.sh sets it)")


def mtl_of_job(tmp_path, home_conf=None, extra_env=None):
    """OMPI_MCA_mtl in a 1-rank job after baton.Runtime(), with $HOME/.openmpi/mca-params.conf
    holding `home_conf` (the user's file beats the system's)."""
    home = tmp_path / "home"
    (home / ".openmpi").mkdir(parents=True, exist_ok=True)
    if home_conf is not None:
        (home / ".openmpi" / "mca-params.conf").write_text(home_conf)
    env = {"HOME": str(home)}
    env.update(extra_env or {})
    rc, _, out = run_job(tmp_path, PRINT_MTL, ranks=1, extra_env=env)
    assert rc == 0, out
    lines = [line for line in out.splitlines() if line.startswith("mtl=")]
    assert len(lines) == 1, out
    return lines[0][len("mtl="):]


def adapter(patterns):
    return any(glob.glob(p) for p in patterns)


def test_psm_transports_without_their_adapter_are_left_out_and_the_files_exclusion_kept(tmp_path):
    want = "^ofi"
    # What this node has decides (the same facts Open MPI's components check).
    if not adapter(["/dev/ipath*", "/sys/class/infiniband/qib*", "/sys/class/infiniband/ipath*"]):
        want += ",psm"
    if not adapter(["/dev/hfi1*", "/sys/class/infiniband/hfi1*"]) and "PSM2_DEVICES" not in os.environ:
        want += ",psm2"
    got = mtl_of_job(tmp_path, "# the user's file\nmtl = ^ofi\n")
    assert got == (want if want != "^ofi" else "unset")


def test_a_users_mtl_setting_and_an_include_list_are_left_alone(tmp_path):
    assert mtl_of_job(tmp_path, "mtl = ^ofi\n", {"OMPI_MCA_mtl": "^ofi,psm"}) == "^ofi,psm"
    assert mtl_of_job(tmp_path / "include", "mtl = ofi\n") == "unset"
