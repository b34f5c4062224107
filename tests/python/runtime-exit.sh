#!/bin/sh
# How a Python job of baton ends (tests/python/runtime_exit_jobs.py): an
# uncaught exception on one rank (exit 1 within seconds), the requeue exit,
# forked children, the exit with a checkpointer open or a save in flight.
# One pytest process; each case launches its own job (mpirun or a lone
# process) with a bound on time.
. "${srcdir:?set by make check}/tests/lib/suite.sh"
here=$srcdir/tests/python
if [ ! -e "$BATON_BUILD_DIR/python/baton/_baton.so" ]; then
  printf 'SKIP\tpython-exit\tpython-exit (not built)\tbuilt without the Python extension: %s\n' \
    "${BATON_PYTHON_SUMMARY:-no Python}" >>"$BATON_TEST_RESULTS/python-exit.tsv"
  exit 0
fi
PYTHONPATH=$BATON_BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH PYTHONDONTWRITEBYTECODE
run_suite python-exit 400 "${BATON_PYTHON:-/usr/bin/python3}" -m pytest -p no:cacheprovider -q -rs \
  --rootdir="$here" -c /dev/null "$here/runtime_exit_jobs.py"
