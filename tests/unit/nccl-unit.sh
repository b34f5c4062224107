#!/bin/sh
# Single-process GoogleTest suite of the nccl backend's control logic (a
# stand-in NCCL table; no GPU, no MPI start-up).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite nccl-unit 300 "$BATON_BUILD_DIR/tests/unit/baton_nccl_unit_tests"
