#!/bin/sh
# scripts/lib/tally's counting (tests/unit/test_tally.sh). About 1 s.
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite tally 60 bash "${srcdir:?set by make check}/tests/lib/run-cases" tally "${srcdir:?set by make check}/tests/unit/test_tally.sh"
