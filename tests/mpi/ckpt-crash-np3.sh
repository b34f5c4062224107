#!/bin/sh
# A restore that dies while reading a version is counted toward its
# quarantine (tests/mpi/test_ckpt_crash.sh, baton_ckpt_crash_prog), 3 ranks.
. "$srcdir/tests/lib/suite.sh"
run_suite ckpt-crash-np3 300 bash "$srcdir/tests/lib/run-cases" ckpt-crash-np3 "$srcdir/tests/mpi/test_ckpt_crash.sh"
