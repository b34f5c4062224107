#!/bin/sh
# baton env / baton hostfile against hostile environments (no cluster).
. "$srcdir/tests/lib/suite.sh"
run_suite spank-cli-env 300 bash "$srcdir/tests/lib/run-cases" spank-cli-env "$srcdir/tests/spank/test_cli_env.sh"
