#!/bin/sh
# The plugin's callbacks against a fake Slurm (no cluster).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite spank-plugin 120 "$BATON_BUILD_DIR/tests/spank/baton_spank_tests"
