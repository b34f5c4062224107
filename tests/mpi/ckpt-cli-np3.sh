#!/bin/sh
# baton ckpt ls|inspect|verify|gc and baton bench ckpt on checkpoints written
# by 3 ranks under mpirun (tests/mpi/test_ckpt_cli.sh). About 30 s.
. "$srcdir/tests/lib/suite.sh"
run_suite ckpt-cli-np3 300 bash "$srcdir/tests/lib/run-cases" ckpt-cli-np3 "$srcdir/tests/mpi/test_ckpt_cli.sh"
