"""Shared by the pytest files of tests/python/ (run by tests/python/run-pytest).

Every rank of an mpirun launch runs the same tests in the same order, each
in its own pytest process; this file

  * writes each test's result as a TSV row (tests/lib/suite.sh's format:
    PASS|FAIL|SKIP, label, test name, detail) into
    $BATON_TEST_RESULTS/$BATON_TEST_LABEL.rank<R>.tsv, so that
    scripts/lib/tally counts it (once over ranks and launches);
  * ends a launch of several ranks at once, with exit 70, when a test
    failed on this rank (its FAIL row written first): the other ranks may
    wait for it in a collective, which would end the launch only at the
    collective deadline and then at every later test. run-pytest writes a
    FAIL row for each test a rank was in when the launch ended (named, with
    the rank that failed it) and goes on with a new launch of the tests no
    rank has finished ($BATON_PYTEST_DONE lists them: deselected here);
  * gives the fixtures: `rt` (a baton Runtime per test, closed after it),
    `shared_dir` (a directory of the test's own, the same path on every
    rank), `rank`/`size` from the launcher's environment (no MPI call).
"""
import os
import re
import sys

import pytest

RANK = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMIX_RANK", "0")))
SIZE = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
EXIT_RANK_FAILED = 70  # a test failed on one rank of several: the launch ends here (run-pytest starts the rest)


def _clean(text):
    return re.sub(r"[\t\r\n]+", " ", str(text)).strip()[:400]


class _ResultRows:
    """Turns pytest's reports into one row per test."""

    def __init__(self, path, label):
        self.path, self.label = path, label
        self.outcome = {}
        # Bookkeeping for run-pytest, beside the launch's shared directory (the results directory holds results).
        base = os.path.join(os.environ.get("BATON_PYTEST_TMP") or os.path.dirname(path), "%s.rank%d" % (label, RANK))
        self.current, self.done = base + ".current", base + ".done"

    def pytest_runtest_logstart(self, nodeid, location):
        # The test this rank is in, for run-pytest when the launch ends inside it.
        with open(self.current, "w") as f:
            f.write(nodeid + "\n")

    def pytest_runtest_logreport(self, report):
        key = report.nodeid
        status, detail = self.outcome.get(key, ("PASS", ""))
        if report.failed and status != "FAIL":
            lines = report.longreprtext.splitlines() or ["(no report)"]
            status, detail = "FAIL", "%s: %s" % (report.when, _clean(lines[-1]))
        elif report.skipped and status == "PASS":
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longreprtext
            status, detail = "SKIP", _clean(reason).replace("Skipped: ", "", 1)
        self.outcome[key] = (status, detail)
        if report.when == "teardown":
            # "python:test_lowlevel.py::test_round_trip[f32]": one name on every rank and launch.
            path, _, test = key.partition("::")
            name = "python:%s::%s" % (os.path.basename(path), test)
            with open(self.path, "a") as f:
                f.write("%s\t%s\t%s\t%s\n" % (status, self.label, _clean(name), detail))
            with open(self.done, "a") as f:
                f.write(key + "\n")
            with open(self.current, "w") as f:
                f.write("")
            del self.outcome[key]
            if status == "FAIL" and SIZE > 1:
                self._end_launch(key)

    def _end_launch(self, key):
        """Ends every rank's process now (MPI_Abort): a peer may wait for this rank in a collective of the test."""
        sys.stderr.write("conftest: rank %d failed %s; ending this launch (exit %d): run-pytest goes on with the "
                         "tests not yet run\n" % (RANK, key, EXIT_RANK_FAILED))
        sys.stderr.flush()
        sys.stdout.flush()
        from baton import _baton
        _baton._abort_job(EXIT_RANK_FAILED)


def pytest_collection_modifyitems(config, items):
    """Deselects the tests an earlier launch of this run finished ($BATON_PYTEST_DONE: one node id a line)."""
    done_file = os.environ.get("BATON_PYTEST_DONE")
    if not done_file or not os.path.exists(done_file):
        return
    with open(done_file) as f:
        done = {line.strip() for line in f if line.strip()}
    kept = [item for item in items if item.nodeid not in done]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item.nodeid in done])
        items[:] = kept


def pytest_configure(config):
    results, label = os.environ.get("BATON_TEST_RESULTS"), os.environ.get("BATON_TEST_LABEL")
    if results and label:
        os.makedirs(results, exist_ok=True)
        path = os.path.join(results, "%s.rank%d.tsv" % (label, RANK))
        config.pluginmanager.register(_ResultRows(path, label), "baton_result_rows")


@pytest.fixture
def rank():
    return RANK


@pytest.fixture
def size():
    return SIZE


@pytest.fixture
def shared_dir(request):
    """A directory for this test, the same path on every rank of the launch."""
    base = os.environ.get("BATON_PYTEST_TMP")
    if base is None:
        if SIZE > 1:
            pytest.fail("BATON_PYTEST_TMP must name a directory shared by the ranks (tests/python/run-pytest sets it)")
        import tempfile
        base = tempfile.mkdtemp(prefix="baton-pytest-")
    path = os.path.join(base, re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid))
    os.makedirs(path, exist_ok=True)
    return path


@pytest.fixture
def rt():
    """A baton Runtime for this test (collective), closed after it."""
    from baton import _baton
    runtime = _baton.Runtime()
    yield runtime
    runtime.close()
