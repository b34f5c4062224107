"""Cases for tests/python/test_pytest_launch.py, run as a 2-rank launch of their own by run-pytest
(not collected by the suites: no test_ prefix). Rank 1 fails the first while rank 0 waits for it in a
collective; the second must still run, in a new launch."""
from baton import _baton


def test_rank_1_fails_while_rank_0_waits_for_it(rt):
    assert rt.rank != 1, "rank 1 fails on purpose"
    _baton._allgather_bytes(rt, b"x", "waiting for rank 1, which failed")


def test_the_launch_goes_on(rt):
    assert len(_baton._allgather_bytes(rt, bytes([rt.rank]), "every rank")) == rt.size
