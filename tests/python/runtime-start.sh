#!/bin/sh
# What baton.Runtime() sets up before MPI_Init (tests/python/runtime_start_jobs.py):
# Open MPI's PSM transports left out where the node has no adapter, a user's
# setting left alone. One pytest process; each case launches its own 1-rank
# job with a bound on time.
. "${srcdir:?set by make check}/tests/lib/suite.sh"
here=$srcdir/tests/python
if [ ! -e "$BATON_BUILD_DIR/python/baton/_baton.so" ]; then
  printf 'SKIP\tpython-start\tpython-start (not built)\tbuilt without the Python extension: %s\n' \
    "${BATON_PYTHON_SUMMARY:-no Python}" >>"$BATON_TEST_RESULTS/python-start.tsv"
  exit 0
fi
PYTHONPATH=$BATON_BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH PYTHONDONTWRITEBYTECODE
run_suite python-start 400 "${BATON_PYTHON:-/usr/bin/python3}" -m pytest -p no:cacheprovider -q -rs \
  --rootdir="$here" -c /dev/null "$here/runtime_start_jobs.py"
