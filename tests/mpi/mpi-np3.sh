#!/bin/sh
# Multi-rank GoogleTest suite under mpirun, 3 rank(s).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite mpi-np3 300 "${srcdir:?set by make check}/tests/lib/mpirun-ranks" 3 "$BATON_BUILD_DIR/tests/mpi/baton_mpi_tests"
