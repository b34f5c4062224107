#!/bin/sh
# A real broadcast of 2.5 GiB at 2 ranks (tests/mpi/large_test.cc).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite large-np2 300 "${srcdir:?set by make check}/tests/lib/mpirun-ranks" 2 "$BATON_BUILD_DIR/tests/mpi/baton_large_tests"
