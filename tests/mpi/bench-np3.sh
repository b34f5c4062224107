#!/bin/sh
# baton bench collectives under mpirun, 3 ranks: JSON lines, checks, busbw
# factors, the tuning table, a stopped rank (tests/mpi/test_bench.sh). About 20 s.
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite bench-np3 240 bash "${srcdir:?set by make check}/tests/lib/run-cases" bench-np3 "${srcdir:?set by make check}/tests/mpi/test_bench.sh"
