#!/bin/sh
# Multi-rank GoogleTest suite under mpirun, 8 rank(s).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite mpi-np8 300 "${srcdir:?set by make check}/tests/lib/mpirun-ranks" 8 "$BATON_BUILD_DIR/tests/mpi/baton_mpi_tests"
