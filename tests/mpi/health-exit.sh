#!/bin/sh
# A rank that times out exits 75 under mpirun (tests/mpi/test_health_exit.sh).
. "$srcdir/tests/lib/suite.sh"
run_suite health-exit 400 bash "$srcdir/tests/lib/run-cases" health-exit "$srcdir/tests/mpi/test_health_exit.sh"
