#!/bin/sh
# Multi-rank GoogleTest suite under mpirun, 8 rank(s).
. "$srcdir/tests/lib/suite.sh"
run_suite mpi-np8 300 "$srcdir/tests/lib/mpirun-ranks" 8 "$BATON_BUILD_DIR/tests/mpi/baton_mpi_tests"
