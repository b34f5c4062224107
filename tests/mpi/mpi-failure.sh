#!/bin/sh
# After an MPI failure baton calls MPI no more (tests/mpi/test_mpi_failure.sh).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite mpi-failure 200 bash "${srcdir:?set by make check}/tests/lib/run-cases" mpi-failure "${srcdir:?set by make check}/tests/mpi/test_mpi_failure.sh"
