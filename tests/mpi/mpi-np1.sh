#!/bin/sh
# Multi-rank GoogleTest suite under mpirun, 1 rank(s).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite mpi-np1 300 "${srcdir:?set by make check}/tests/lib/mpirun-ranks" 1 "$BATON_BUILD_DIR/tests/mpi/baton_mpi_tests"
