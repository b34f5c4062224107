#!/bin/sh
# Same program, same weights: the default algorithm and BATON_AUTO_FILE
# (tests/mpi/test_reproducible.sh).
. "$srcdir/tests/lib/suite.sh"
run_suite repro-np3 180 bash "$srcdir/tests/lib/run-cases" repro-np3 "$srcdir/tests/mpi/test_reproducible.sh"
