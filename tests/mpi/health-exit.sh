#!/bin/sh
# A rank that times out exits 75 under mpirun (tests/mpi/test_health_exit.sh).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite health-exit 400 bash "${srcdir:?set by make check}/tests/lib/run-cases" health-exit "${srcdir:?set by make check}/tests/mpi/test_health_exit.sh"
