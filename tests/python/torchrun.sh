#!/bin/sh
# A baton program started by torchrun (tests/python/torchrun_jobs.py): refused
# at once, in one line that says how to start it instead. Real torchrun, 2
# workers; about 10 s.
. "${srcdir:?set by make check}/tests/lib/suite.sh"
here=$srcdir/tests/python
if [ ! -e "$BATON_BUILD_DIR/python/baton/_baton.so" ]; then
  printf 'SKIP\ttorchrun\ttorchrun (not built)\tbuilt without the Python extension: %s\n' \
    "${BATON_PYTHON_SUMMARY:-no Python}" >>"$BATON_TEST_RESULTS/torchrun.tsv"
  exit 0
fi
PYTHONPATH=$BATON_BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH PYTHONDONTWRITEBYTECODE
run_suite torchrun 120 "${BATON_PYTHON:-/usr/bin/python3}" -m pytest -p no:cacheprovider -q -rs \
  --rootdir="$here" -c /dev/null "$here/torchrun_jobs.py"
