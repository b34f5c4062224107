#!/bin/sh
# Levels 2 and 3 of the Checkpointer under mpirun, 4 ranks split into "nodes" (ckpt_levels_test.cc).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite ckpt-levels-np4 600 "${srcdir:?set by make check}/tests/lib/mpirun-ranks" 4 "$BATON_BUILD_DIR/tests/mpi/baton_ckpt_tests" \
  --gtest_filter='Levels.*'
