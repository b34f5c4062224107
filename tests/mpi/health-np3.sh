#!/bin/sh
# Deadlines, heartbeats, stragglers, agreed stop under mpirun, 3 ranks
# (tests/mpi/health_test.cc). About 40 s: the deadlines and SIGSTOPs are real.
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite health-np3 300 "${srcdir:?set by make check}/tests/lib/mpirun-ranks" 3 "$BATON_BUILD_DIR/tests/mpi/baton_health_tests"
