# shellcheck shell=sh
# Shared by every test suite runner (POSIX sh: make check runs these with
# /bin/sh). Sourced, not executed.
#
# Results go to $BATON_TEST_RESULTS as TSV rows that scripts/lib/tally sums:
#   PASS|FAIL|SKIP <TAB> label <TAB> test name <TAB> detail
#   EXIT <TAB> label <TAB> exit code <TAB> command <TAB> wall seconds
# The EXIT row lets the tally count a suite that crashed or hung before
# reporting any test as a failure instead of silently as nothing.

: "${BATON_TEST_RESULTS:?BATON_TEST_RESULTS must name the results directory}"
mkdir -p "$BATON_TEST_RESULTS"

# run_suite LABEL TIMEOUT_SECONDS COMMAND...
# Runs one suite with a hard time limit, so nothing in CI can hang.
run_suite() {
  _label=$1 _limit=$2
  shift 2
  rm -f "$BATON_TEST_RESULTS/$_label".*tsv
  BATON_TEST_LABEL=$_label
  export BATON_TEST_LABEL
  _rc=0
  _t0=$(date +%s)
  timeout --kill-after=15 "$_limit" "$@" || _rc=$?
  _wall=$(($(date +%s) - _t0))
  [ "$_rc" -eq 124 ] && echo "suite $_label: timed out after ${_limit}s" >&2
  echo "suite $_label: exit $_rc after ${_wall}s" >&2
  printf 'EXIT\t%s\t%s\t%s\t%s\n' "$_label" "$_rc" "$*" "$_wall" >> "$BATON_TEST_RESULTS/$_label.exit.tsv"
  return "$_rc"
}
