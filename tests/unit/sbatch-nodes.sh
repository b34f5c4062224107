#!/bin/sh
# examples/train.sbatch and train_ddp.sbatch on a failure of `baton nodes`,
# and `baton step-end` (tests/unit/test_sbatch_nodes.sh). About 5 s.
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite sbatch-nodes 120 bash "${srcdir:?set by make check}/tests/lib/run-cases" sbatch-nodes "${srcdir:?set by make check}/tests/unit/test_sbatch_nodes.sh"
