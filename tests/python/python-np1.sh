#!/bin/sh
# The pytest suites of tests/python/ under mpirun with 1 rank(s) (tests/python/run-pytest).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite python-np1 600 "${srcdir:?set by make check}/tests/python/run-pytest" python-np1 1
