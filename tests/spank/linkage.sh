#!/bin/sh
# What spank_baton.so exports and links, checked on the built plugin.
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite spank-linkage 60 bash "${srcdir:?set by make check}/tests/lib/run-cases" spank-linkage "${srcdir:?set by make check}/tests/spank/test_linkage.sh"
