#!/bin/sh
# The MPI calls of each all-reduce algorithm (MPI's profiling interface), 1 rank(s).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite calls-np1 300 "${srcdir:?set by make check}/tests/lib/mpirun-ranks" 1 "$BATON_BUILD_DIR/tests/mpi/baton_calls_tests"
