#!/bin/sh
# A build without NCCL leaves the NCCL and GPU-bundle suites out (configure's
# "tests not built" line); each of them writes one SKIP row here that says
# so, so the summary line counts and names them instead of dropping them.
. "${srcdir:?set by make check}/tests/lib/suite.sh"
for suite in nccl-unit nccl-np2 nccl-np3 gpu-bundle; do
  # shellcheck disable=SC2016  # the inner sh expands $1, $2 and the results directory
  run_suite "$suite" 10 sh -c 'printf "SKIP\t%s\t%s (not built)\tbuilt without NCCL: %s\n" "$1" "$1" "$2" >>"$BATON_TEST_RESULTS/$1.tsv"' \
    sh "$suite" "${BATON_NCCL_SUMMARY:-no NCCL}"
done
