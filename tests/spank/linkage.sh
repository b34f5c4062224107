#!/bin/sh
# What spank_baton.so exports and links, checked on the built plugin.
. "$srcdir/tests/lib/suite.sh"
run_suite spank-linkage 60 bash "$srcdir/tests/lib/run-cases" spank-linkage "$srcdir/tests/spank/test_linkage.sh"
