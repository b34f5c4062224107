#!/bin/sh
# Misuses of the public API that must not compile (tests/unit/test_api_misuse.sh).
. "$srcdir/tests/lib/suite.sh"
run_suite api-misuse 120 bash "$srcdir/tests/lib/run-cases" api-misuse "$srcdir/tests/unit/test_api_misuse.sh"
