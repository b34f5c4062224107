#!/bin/sh
# The MPI collectives of a small checkpoint save and the threads of SaveAsync (MPI's profiling interface), 3 rank(s).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite ckpt-calls-np3 300 "${srcdir:?set by make check}/tests/lib/mpirun-ranks" 3 "$BATON_BUILD_DIR/tests/mpi/baton_ckpt_calls_tests"
