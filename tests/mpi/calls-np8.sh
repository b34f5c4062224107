#!/bin/sh
# The MPI calls of each all-reduce algorithm (MPI's profiling interface), 8 rank(s).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite calls-np8 300 "${srcdir:?set by make check}/tests/lib/mpirun-ranks" 8 "$BATON_BUILD_DIR/tests/mpi/baton_calls_tests"
