#!/bin/sh
# docs/python.md's quickstart program, as the page shows it, at 2 ranks under
# mpirun, run twice (tests/python/test_quickstart.sh); about 20 s.
. "${srcdir:?set by make check}/tests/lib/suite.sh"
if [ ! -e "$BATON_BUILD_DIR/python/baton/_baton.so" ]; then
  printf 'SKIP\tquickstart\tquickstart (not built)\tbuilt without the Python extension: %s\n' \
    "${BATON_PYTHON_SUMMARY:-no Python}" >>"$BATON_TEST_RESULTS/quickstart.tsv"
  exit 0
fi
run_suite quickstart 300 bash "$srcdir/tests/lib/run-cases" quickstart "$srcdir/tests/python/test_quickstart.sh"
