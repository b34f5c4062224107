#!/bin/sh
# baton ckpt ls|inspect|verify|gc and baton bench ckpt on checkpoints written
# by 3 ranks under mpirun (tests/mpi/test_ckpt_cli.sh). About 30 s.
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite ckpt-cli-np3 300 bash "${srcdir:?set by make check}/tests/lib/run-cases" ckpt-cli-np3 "${srcdir:?set by make check}/tests/mpi/test_ckpt_cli.sh"
