#!/bin/sh
# Same program, same weights: the default algorithm and BATON_AUTO_FILE
# (tests/mpi/test_reproducible.sh).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite repro-np3 180 bash "${srcdir:?set by make check}/tests/lib/run-cases" repro-np3 "${srcdir:?set by make check}/tests/mpi/test_reproducible.sh"
