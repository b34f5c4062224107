#!/bin/sh
# Multi-rank GoogleTest suite under mpirun, 2 rank(s).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite mpi-np2 300 "${srcdir:?set by make check}/tests/lib/mpirun-ranks" 2 "$BATON_BUILD_DIR/tests/mpi/baton_mpi_tests"
