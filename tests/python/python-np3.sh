#!/bin/sh
# The pytest suites of tests/python/ under mpirun with 3 rank(s) (tests/python/run-pytest).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite python-np3 600 "${srcdir:?set by make check}/tests/python/run-pytest" python-np3 3
