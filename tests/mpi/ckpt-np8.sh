#!/bin/sh
# Checkpointer and HDF5 shard tests under mpirun, 8 rank(s) (Reshard.*: ckpt-reshard.sh;
# the 80 MiB-per-rank memory test runs at 1 and 3 ranks only).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite ckpt-np8 600 "${srcdir:?set by make check}/tests/lib/mpirun-ranks" 8 "$BATON_BUILD_DIR/tests/mpi/baton_ckpt_tests" \
  --gtest_filter='-Reshard.*:Levels.*:CkptTest.SaveAndRestoreMakeNoWholeCopies'
