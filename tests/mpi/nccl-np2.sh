#!/bin/sh
# Multi-rank GoogleTest suite of the nccl backend's MPI bootstrap, 2 ranks.
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite nccl-np2 300 "${srcdir:?set by make check}/tests/lib/mpirun-ranks" 2 "$BATON_BUILD_DIR/tests/mpi/baton_nccl_mpi_tests"
