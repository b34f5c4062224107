#!/bin/sh
# `baton run` before it launches anything, through the examples' job scripts,
# and `baton step-end` (tests/unit/test_sbatch_nodes.sh). About 5 s.
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite sbatch-nodes 120 bash "${srcdir:?set by make check}/tests/lib/run-cases" sbatch-nodes "${srcdir:?set by make check}/tests/unit/test_sbatch_nodes.sh"
