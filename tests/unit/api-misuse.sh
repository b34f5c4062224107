#!/bin/sh
# Misuses of the public API that must not compile (tests/unit/test_api_misuse.sh).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite api-misuse 120 bash "${srcdir:?set by make check}/tests/lib/run-cases" api-misuse "${srcdir:?set by make check}/tests/unit/test_api_misuse.sh"
