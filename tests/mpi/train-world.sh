#!/bin/sh
# baton-train at 1 to 5 ranks and resumed across world sizes (3 -> 2,
# 2 -> 3, 4 -> 3 -> 2, 3 -> 1): the same final checksum every time
# (tests/mpi/test_train_world.sh).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite train-world 300 bash "${srcdir:?set by make check}/tests/lib/run-cases" train-world "${srcdir:?set by make check}/tests/mpi/test_train_world.sh"
