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
# Under a sanitizer (BATON_SANITIZE, set by scripts/check --sanitize) the
# limit is scaled: the limits are sized for the plain build on 2 cores, and
# ThreadSanitizer's 5-15x slowdown put mpi-np8 (8 ranks) and train-np3 past
# theirs with no report in their logs (exit 124 at 300 s and 400 s).
# BATON_SUITE_TIME_SCALE overrides the factor.
run_suite() {
  _label=$1 _limit=$2
  shift 2
  case ${BATON_SANITIZE:-} in
    '') _scale=1 ;;
    thread) _scale=4 ;;
    *) _scale=2 ;;
  esac
  _limit=$((_limit * ${BATON_SUITE_TIME_SCALE:-$_scale}))
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
