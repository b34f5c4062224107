#!/bin/sh
# Checkpointer and HDF5 shard tests under mpirun, 3 rank(s) (Reshard.*: ckpt-reshard.sh).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite ckpt-np3 600 "${srcdir:?set by make check}/tests/lib/mpirun-ranks" 3 "$BATON_BUILD_DIR/tests/mpi/baton_ckpt_tests" \
  --gtest_filter='-Reshard.*:Levels.*'
