# shellcheck shell=bash
# Shell test cases (bash): functions named test_* in a file, each run in a
# subshell under `set -euo pipefail`, each writing one result row (see
# tests/lib/suite.sh). Used by the cluster suites and tests/spank/.

# run_case LABEL FUNCTION: runs one test function in a subshell with
# `set -euo pipefail`. Exit 0 passes, 77 skips (the last line of output
# says why), anything else fails with the last lines of output as detail.
# Each case has its own time limit (BATON_CASE_TIMEOUT seconds, 480 by
# default, scaled as run_suite scales a suite's under a sanitizer): a case
# that hangs (a step waiting for a node that never comes back) fails by its
# name, with its output and, in a cluster suite, the queue and the nodes'
# states, and the suite goes on. Before, the suite's own limit (1200 s) ended
# everything and the tally could say only that the suite timed out.
run_case() {
  local label=$1 fn=$2 out rc detail status t0 limit pid watchdog
  limit=$(case_time_limit)
  out=$(mktemp)
  echo "--- [$label] $fn" >&2
  t0=$SECONDS
  # Job control puts the case (and, separately, its watchdog) in a process
  # group of its own, so that a timeout ends everything the case started;
  # inside the case it is off again, as the cases expect.
  set -m
  (set +m; set -euo pipefail; "$fn") >"$out" 2>&1 </dev/null &
  pid=$!
  (set +m; sleep "$limit"
   { echo "TIMEOUT: $fn ran past its limit of ${limit}s (BATON_CASE_TIMEOUT)"; case_timeout_context; } >>"$out" 2>&1
   : >"$out.timeout"
   kill -TERM -- -"$pid" 2>/dev/null; sleep 15; kill -KILL -- -"$pid" 2>/dev/null) >/dev/null 2>&1 &
  watchdog=$!
  set +m
  rc=0
  wait "$pid" || rc=$?
  kill -KILL -- -"$watchdog" 2>/dev/null || true
  wait "$watchdog" 2>/dev/null || true
  sed 's/^/    /' "$out" >&2
  if [ -e "$out.timeout" ]; then
    status=FAIL detail="timed out after ${limit}s: $(grep -v '^TIMEOUT:' "$out" | tail -n 3 | tr '\t\n' '  ')"
  else
    case $rc in
      0) status=PASS detail= ;;
      77) status=SKIP detail=$(tail -n 1 "$out") ;;
      *) status=FAIL detail="exit $rc: $(tail -n 3 "$out" | tr '\t\n' '  ')" ;;
    esac
  fi
  echo "--- [$label] $fn: $status ($((SECONDS - t0)) s)" >&2
  [ "$status" != FAIL ] || case_after_failure
  printf '%s\t%s\t%s\t%s\n' "$status" "$label" "$fn" "$detail" >> "$BATON_TEST_RESULTS/$label.tsv"
  rm -f "$out" "$out.timeout"
}

# case_time_limit: seconds a case may run (see run_case).
case_time_limit() {
  local limit=${BATON_CASE_TIMEOUT:-480} scale=1
  case ${BATON_SANITIZE:-} in
    '') ;;
    thread) scale=4 ;;
    *) scale=2 ;;
  esac
  echo $((limit * ${BATON_SUITE_TIME_SCALE:-$scale}))
}

# case_timeout_context: what a timed-out case's output gains; the cluster
# suites' lib.sh redefines it (the queue, the nodes and why they are down).
case_timeout_context() { :; }

# case_after_failure: what follows a failed case before the next one; the
# cluster suites' lib.sh redefines it (cancels the case's jobs).
case_after_failure() { :; }

# run_cases LABEL FILE: every function named test_* in FILE, in file order.
run_cases() {
  local label=$1 file=$2 fn
  rm -f "$BATON_TEST_RESULTS/$label.tsv"
  # shellcheck source=/dev/null
  . "$file"
  local fns fn
  mapfile -t fns < <(grep -oE '^test_[A-Za-z0-9_]+' "$file")
  for fn in "${fns[@]}"; do
    # BATON_CASES=ERE runs only the matching cases (for development: the
    # check never sets it, so no case is left out there).
    [[ -z "${BATON_CASES:-}" || "$fn" =~ $BATON_CASES ]] || continue
    run_case "$label" "$fn"
  done
}

fail() { echo "FAIL: $*" >&2; exit 1; }

expect_eq() {  # expect_eq ACTUAL EXPECTED WHAT
  [ "$1" = "$2" ] || fail "$3: got '$1', expected '$2'"
}

