#!/bin/sh
# baton env / baton hostfile against hostile environments (no cluster).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite spank-cli-env 300 bash "${srcdir:?set by make check}/tests/lib/run-cases" spank-cli-env "${srcdir:?set by make check}/tests/spank/test_cli_env.sh"
