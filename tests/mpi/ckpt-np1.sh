#!/bin/sh
# Checkpointer and HDF5 shard tests under mpirun, 1 rank(s) (Reshard.*: ckpt-reshard.sh;
# RanksMustPassTheSameStep needs two ranks).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite ckpt-np1 600 "${srcdir:?set by make check}/tests/lib/mpirun-ranks" 1 "$BATON_BUILD_DIR/tests/mpi/baton_ckpt_tests" \
  --gtest_filter='-Reshard.*:Levels.*:CkptTest.RanksMustPassTheSameStep'
