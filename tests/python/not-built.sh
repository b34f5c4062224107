#!/bin/sh
# A build without the Python extension (configure's "tests not built" line)
# leaves the pytest suites out; each writes one SKIP row that says so.
. "${srcdir:?set by make check}/tests/lib/suite.sh"
for suite in python-np1 python-np3; do
  # shellcheck disable=SC2016  # the inner sh expands $1, $2 and the results directory
  run_suite "$suite" 10 sh -c 'printf "SKIP\t%s\t%s (not built)\tbuilt without the Python extension: %s\n" "$1" "$1" "$2" >>"$BATON_TEST_RESULTS/$1.tsv"' \
    sh "$suite" "${BATON_PYTHON_SUMMARY:-no Python}"
done
