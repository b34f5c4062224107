#!/bin/sh
# scripts/lib/tally's counting (tests/unit/test_tally.sh). About 1 s.
. "$srcdir/tests/lib/suite.sh"
run_suite tally 60 bash "$srcdir/tests/lib/run-cases" tally "$srcdir/tests/unit/test_tally.sh"
