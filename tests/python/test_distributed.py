"""baton.init_process_group: torch.distributed's group from baton's Runtime (under mpirun, and with the plugin's variables).

Each test sets up the default process group, checks it with collectives
whose result depends on every rank, and destroys it.
"""
import os
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import baton  # noqa: E402

PLUGIN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture
def no_plugin_vars(monkeypatch):
    for k in PLUGIN_VARS:
        monkeypatch.delenv(k, raising=False)


@pytest.fixture
def destroy():
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


def _check_group(rank, size):
    assert dist.get_rank() == rank and dist.get_world_size() == size
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    assert t.item() == size * (size + 1) / 2
    ranks = [None] * size
    dist.all_gather_object(ranks, rank)
    assert ranks == list(range(size))


def test_init_process_group_over_mpi(rt, no_plugin_vars, destroy):
    where = baton.init_process_group(rt, backend="gloo", timeout=60)
    host, _, port = where.rpartition(":")
    assert host and int(port) > 0, where
    _check_group(rt.rank, rt.size)
    # A second call keeps the group that fits.
    assert baton.init_process_group(rt, backend="gloo") is None
    _check_group(rt.rank, rt.size)


def test_init_process_group_from_plugin_variables(rt, monkeypatch, destroy):
    import datetime

    from mpi4py import MPI
    from torch.distributed import TCPStore
    # Rank 0 hosts the store on a port the kernel picks and holds it (no port found free, closed, then
    # hoped free: issue 46); every rank reaches it as a client, as under torchelastic's agent store.
    store, port = None, None
    if rt.rank == 0:
        store = TCPStore("127.0.0.1", 0, rt.size, is_master=True, timeout=datetime.timedelta(seconds=60),
                         wait_for_workers=False)
        port = store.port
    port = MPI.COMM_WORLD.bcast(port, root=0)
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
    monkeypatch.setenv("RANK", str(rt.rank))
    monkeypatch.setenv("WORLD_SIZE", str(rt.size))
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    assert baton.init_process_group(rt, backend="gloo", timeout=60) == f"127.0.0.1:{port}"
    _check_group(rt.rank, rt.size)
    dist.destroy_process_group()  # while rank 0's store still serves
    del store


def test_plugin_variables_that_contradict_the_runtime_are_refused(rt, monkeypatch):
    monkeypatch.setenv("RANK", str((rt.rank + 1) % max(rt.size, 2)))
    monkeypatch.setenv("WORLD_SIZE", str(max(rt.size, 2)))
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "1")
    with pytest.raises(baton.InvalidArgument) as e:
        baton.init_process_group(rt, backend="gloo", timeout=5)
    assert f"RANK={(rt.rank + 1) % max(rt.size, 2)}" in str(e.value)
    assert f"rank {rt.rank} of {rt.size}" in str(e.value)
    assert not dist.is_initialized()
    monkeypatch.setenv("RANK", "zero")
    with pytest.raises(baton.InvalidArgument, match="RANK='zero'"):
        baton.init_process_group(rt, backend="gloo", timeout=5)


@pytest.mark.parametrize("bad", [0, -1, "60", True])
def test_bad_timeout_is_refused(rt, no_plugin_vars, bad):
    with pytest.raises(baton.InvalidArgument, match="timeout="):
        baton.init_process_group(rt, backend="gloo", timeout=bad)
    assert not dist.is_initialized()


def test_a_late_rank_ends_the_set_up_in_time(rt, no_plugin_vars, destroy):
    """A rank that comes after the others' deadline: every rank raises within its timeout, none waits on."""
    if rt.size < 2:
        pytest.skip("needs 2 ranks or more (python-np3 runs it)")
    late = rt.rank == rt.size - 1
    if late:
        time.sleep(4)
    t0 = time.monotonic()
    with pytest.raises((baton.TimeoutError, baton.Unavailable)) as e:
        baton.init_process_group(rt, backend="gloo", timeout=2)
    took = time.monotonic() - t0
    assert took < 2 + 10, f"rank {rt.rank} took {took:.1f} s to give up ({e.value})"
    assert "init_process_group" in str(e.value)
    assert not dist.is_initialized()
    # The ranks meet again before the next test (rank 0's store is gone by then).
    rt.should_stop()


def test_import_baton_does_not_import_torch():
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-c", "import sys, baton; print('torch' in sys.modules)"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("error, cures", [
    (RuntimeError("[gloo/transport/tcp/pair.cc:561] Connection closed by peer [127.0.0.1]:32171"), True),
    (RuntimeError("[pair.cc:545] Read error [127.0.0.1]:55011: Connection reset by peer"), True),
    (RuntimeError("NCCL error: remote process exited or there was a network error, ncclRemoteError"), True),
    (baton.TimeoutError("a deadline"), True),
    (baton.Unavailable("a node"), True),
    (baton.InvalidArgument("bad input"), False),
    (baton.CorruptCheckpointError("bad bytes"), False),
    (RuntimeError("mat1 and mat2 shapes cannot be multiplied (4x3 and 5x6)"), False),
    (ZeroDivisionError("a bug"), False),
    (KeyError("timeout"), False),  # only a RuntimeError's text is read
])
def test_requeue_cures_a_lost_peer_not_a_bug(error, cures):
    assert baton.requeue_cures(error) is cures


def test_requeue_cures_torch_distributed_errors():
    assert baton.requeue_cures(dist.DistNetworkError("connect() timed out"))
    assert baton.requeue_cures(dist.DistStoreError("wait timeout"))
