#!/bin/sh
# Multi-rank GoogleTest suite of the nccl backend's MPI bootstrap, 3 ranks.
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite nccl-np3 300 "${srcdir:?set by make check}/tests/lib/mpirun-ranks" 3 "$BATON_BUILD_DIR/tests/mpi/baton_nccl_mpi_tests"
