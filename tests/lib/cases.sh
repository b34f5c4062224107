# shellcheck shell=bash
# Shell test cases (bash): functions named test_* in a file, each run in a
# subshell under `set -euo pipefail`, each writing one result row (see
# tests/lib/suite.sh). Used by the cluster suites and tests/spank/.

# run_case LABEL FUNCTION: runs one test function in a subshell with
# `set -euo pipefail`. Exit 0 passes, 77 skips (the last line of output
# says why), anything else fails with the last lines of output as detail.
run_case() {
  local label=$1 fn=$2 out rc detail status
  out=$(mktemp)
  echo "--- [$label] $fn" >&2
  (set -euo pipefail; "$fn") >"$out" 2>&1
  rc=$?
  sed 's/^/    /' "$out" >&2
  case $rc in
    0) status=PASS detail= ;;
    77) status=SKIP detail=$(tail -n 1 "$out") ;;
    *) status=FAIL detail="exit $rc: $(tail -n 3 "$out" | tr '\t\n' '  ')" ;;
  esac
  echo "--- [$label] $fn: $status" >&2
  printf '%s\t%s\t%s\t%s\n' "$status" "$label" "$fn" "$detail" >> "$BATON_TEST_RESULTS/$label.tsv"
  rm -f "$out"
}

# run_cases LABEL FILE: every function named test_* in FILE, in file order.
run_cases() {
  local label=$1 file=$2 fn
  rm -f "$BATON_TEST_RESULTS/$label.tsv"
  # shellcheck source=/dev/null
  . "$file"
  local fns fn
  mapfile -t fns < <(grep -oE '^test_[A-Za-z0-9_]+' "$file")
  for fn in "${fns[@]}"; do
    run_case "$label" "$fn"
  done
}

fail() { echo "FAIL: $*" >&2; exit 1; }

expect_eq() {  # expect_eq ACTUAL EXPECTED WHAT
  [ "$1" = "$2" ] || fail "$3: got '$1', expected '$2'"
}

