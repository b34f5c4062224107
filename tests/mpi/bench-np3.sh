#!/bin/sh
# baton bench collectives under mpirun, 3 ranks: JSON lines, checks, busbw
# factors, the tuning table, a stopped rank (tests/mpi/test_bench.sh). About 20 s.
. "$srcdir/tests/lib/suite.sh"
run_suite bench-np3 240 bash "$srcdir/tests/lib/run-cases" bench-np3 "$srcdir/tests/mpi/test_bench.sh"
