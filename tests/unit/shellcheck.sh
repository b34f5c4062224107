#!/bin/sh
# Runs shellcheck on every shell script in scripts/ and tests/ (tests/unit/test_shellcheck.sh).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite shellcheck 300 bash "${srcdir:?set by make check}/tests/lib/run-cases" shellcheck "${srcdir:?set by make check}/tests/unit/test_shellcheck.sh"
