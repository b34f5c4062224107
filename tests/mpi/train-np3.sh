#!/bin/sh
# baton-train under mpirun with 3 ranks: bad options refused, and runs
# interrupted by an agreed stop, kill -9 of a rank and of mpirun, resumed,
# ending with the uninterrupted run's weights (tests/mpi/test_train.sh).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite train-np3 400 bash "${srcdir:?set by make check}/tests/lib/run-cases" train-np3 "${srcdir:?set by make check}/tests/mpi/test_train.sh"
