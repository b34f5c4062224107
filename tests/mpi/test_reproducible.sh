# shellcheck shell=bash
# Shell cases: bit-reproducible training runs (issue 14, item 10), with
# tests/mpi/baton_repro_prog at 3 ranks (run by tests/mpi/repro-np3.sh).
# Every run ignores the user's tuning table.

PROG=${BATON_BUILD_DIR:?}/tests/mpi/baton_repro_prog
export BATON_TUNE_FILE=/nonexistent/baton-tune.json

# The weights' hash of one run of the program (3 ranks).
run() {
  "$REPO/tests/lib/mpirun-ranks" 3 "$PROG" "$@" | sed -n 's/^weights //p'
}

test_default_runs_are_identical_and_native() {
  unset BATON_ALGORITHM
  local first second native
  first=$(run 30)
  second=$(run 30)
  native=$(run 30 --algorithm native)
  echo "default: $first, again: $second, native: $native"
  [ -n "$first" ] || fail "no weights printed"
  expect_eq "$second" "$first" "weights of a second default run"
  expect_eq "$native" "$first" "weights of a native run against the default's"
}

test_baton_algorithm_switches_and_names_a_bad_value() {
  local ring native out rc=0
  native=$(run 30 --algorithm native)
  ring=$(BATON_ALGORITHM=ring run 30)
  echo "native: $native, BATON_ALGORITHM=ring: $ring"
  { [ -n "$ring" ] && [ "$ring" != "$native" ]; } || fail "BATON_ALGORITHM=ring did not change the sums"
  out=$(BATON_ALGORITHM=fastest "$REPO/tests/lib/mpirun-ranks" 1 "$PROG" 3 2>&1) || rc=$?
  echo "$out"
  [ "$rc" -ne 0 ] || fail "exit 0 with BATON_ALGORITHM=fastest"
  echo "$out" | grep -q "BATON_ALGORITHM='fastest' is not one of native, hierarchical, ring, auto" ||
    fail "the bad value is not named"
}

# auto measures on its first calls (results as native's meanwhile), keeps
# its decisions in BATON_AUTO_FILE, and a requeued run (resumed from the
# weights saved at step 20) takes them from there: it ends with the
# uninterrupted run's weights.
test_a_requeued_auto_run_makes_the_first_runs_choices() {
  local dir full resumed
  dir=$(mktemp -d)
  full=$(BATON_ALGORITHM=auto BATON_AUTO_FILE=$dir/auto.json run 30 --save-at 20 "$dir/w")
  [ -s "$dir/auto.json" ] || fail "auto wrote no decisions to BATON_AUTO_FILE"
  cat "$dir/auto.json"
  resumed=$(BATON_ALGORITHM=auto BATON_AUTO_FILE=$dir/auto.json run 30 --resume "$dir/w")
  echo "uninterrupted: $full, requeued: $resumed"
  [ -n "$full" ] || fail "no weights printed"
  expect_eq "$resumed" "$full" "weights of the requeued run"
  rm -rf "$dir"
}
