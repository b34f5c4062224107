#!/bin/sh
# Single-process GoogleTest suite (no MPI, no cluster).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite unit 300 "$BATON_BUILD_DIR/tests/unit/baton_unit_tests"
