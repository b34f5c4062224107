# shellcheck shell=bash
# scripts/lib/tally: what the summary line counts. Sourced by tests/lib/run-cases.

tally() { "$REPO/scripts/lib/tally" "$@"; }

# rows DIR FILE LINE...: writes result rows (fields separated by |) into DIR/FILE.
rows() {
  local dir=$1 file=$2
  shift 2
  printf '%s\n' "$@" | tr '|' '\t' >"$dir/$file"
}

test_one_test_in_five_launches_counts_once() {
  local d out
  d=$(mktemp -d)
  for l in mpi-np1 mpi-np2 mpi-np3 mpi-np8 cluster-mpi; do
    rows "$d" "$l.rank0.tsv" "PASS|$l|Coll.AllReduce/f32_7|" "PASS|$l|Coll.AllReduce/f32_1001|"
    rows "$d" "$l.rank1.tsv" "PASS|$l|Coll.AllReduce/f32_7|" "PASS|$l|Coll.AllReduce/f32_1001|"
    rows "$d" "$l.exit.tsv" "EXIT|$l|0|cmd"
  done
  out=$(tally "$d") || fail "tally failed: $out"
  echo "$out"
  expect_eq "$(tail -n 1 <<<"$out")" "2 passed, 0 failed, 0 skipped" "summary"
  grep -q '^20 result rows from 5 launches: 2 distinct test cases$' <<<"$out" || fail "no launch count line"
  rm -rf "$d"
}

test_a_failure_on_one_rank_of_one_launch_fails_the_case_and_names_the_launch() {
  local d out rc=0
  d=$(mktemp -d)
  rows "$d" a.rank0.tsv "PASS|mpi-np3|T.x|" "PASS|mpi-np3|T.y|"
  rows "$d" a.rank1.tsv "FAIL|mpi-np3|T.x|boom" "PASS|mpi-np3|T.y|"
  rows "$d" b.rank0.tsv "PASS|mpi-np8|T.x|" "SKIP|mpi-np8|T.y|no gpu"
  rows "$d" exit.tsv "EXIT|mpi-np3|1|cmd" "EXIT|mpi-np8|0|cmd"
  out=$(tally "$d") || rc=$?
  echo "$out"
  expect_eq "$rc" 1 "tally's exit code"
  expect_eq "$(tail -n 1 <<<"$out")" "1 passed, 1 failed, 0 skipped" "summary"
  grep -q 'failed in: mpi-np3 (ran in mpi-np3,mpi-np8)' <<<"$out" || fail "the failing launch is not named"
  # The name again just above the summary: a CI log read from its tail shows it.
  expect_eq "$(tail -n 2 <<<"$out" | head -n 1)" "failed: T.x" "the failed case's name above the summary"
  rm -rf "$d"
}

test_a_suite_that_crashed_without_a_row_is_a_failure() {
  local d out rc=0
  d=$(mktemp -d)
  rows "$d" a.tsv "PASS|u|T.x|"
  rows "$d" exit.tsv "EXIT|u|0|cmd" "EXIT|crashed|139|prog"
  out=$(tally "$d") || rc=$?
  echo "$out"
  expect_eq "$rc" 1 "tally's exit code"
  expect_eq "$(tail -n 1 <<<"$out")" "1 passed, 1 failed, 0 skipped" "summary"
  rm -rf "$d"
}

test_a_case_passed_in_one_launch_and_skipped_in_another_counts_as_passed() {
  local d out
  d=$(mktemp -d)
  # Needs two ranks: skips at np1, passes at np3 (on every rank).
  rows "$d" np1.rank0.tsv "SKIP|mpi-np1|Uneven.Pair|needs 2 ranks" "PASS|mpi-np1|T.a|"
  rows "$d" np3.rank0.tsv "PASS|mpi-np3|Uneven.Pair|" "PASS|mpi-np3|T.a|"
  rows "$d" np3.rank1.tsv "PASS|mpi-np3|Uneven.Pair|" "PASS|mpi-np3|T.a|"
  # Skipped in every launch: a skip, named with its reason and launches.
  rows "$d" np8.rank0.tsv "SKIP|mpi-np8|Gpu.X|no gpu"
  rows "$d" gpu.tsv "SKIP|gpu|Gpu.X|no gpu"
  rows "$d" exit.tsv "EXIT|mpi-np1|0|c" "EXIT|mpi-np3|0|c" "EXIT|mpi-np8|0|c" "EXIT|gpu|0|c"
  out=$(tally "$d") || fail "tally failed: $out"
  echo "$out"
  expect_eq "$(tail -n 1 <<<"$out")" "2 passed, 0 failed, 1 skipped" "summary"
  grep -q '^SKIPPED Gpu.X: no gpu (in gpu,mpi-np8)$' <<<"$out" || fail "the skip is not named with its launches"
  grep -q '^8 result rows from 4 launches: 3 distinct test cases (1 of the passed skipped in some launch)$' <<<"$out" ||
    fail "the rows line does not say a passed case skipped somewhere"
  ! grep -q 'Uneven.Pair' <<<"$out" || fail "a case that passed is listed as a skip"
  rm -rf "$d"
}

test_each_suites_wall_time_is_listed_longest_first() {
  local d out
  d=$(mktemp -d)
  rows "$d" a.tsv "PASS|fast|T.a|" "PASS|slow|T.b|" "PASS|old|T.c|"
  # The fifth field is the wall time (tests/lib/suite.sh); an old row without it is not listed.
  rows "$d" exit.tsv "EXIT|fast|0|c|3" "EXIT|slow|0|c|120" "EXIT|old|0|c"
  out=$(tally "$d") || fail "tally failed: $out"
  echo "$out"
  grep -q '^suite wall times (2 suites, 123 s in all):$' <<<"$out" || fail "no wall-time header"
  grep -q '^  slow 120s fast 3s$' <<<"$out" || fail "the times are not listed longest first"
  expect_eq "$(tail -n 1 <<<"$out")" "3 passed, 0 failed, 0 skipped" "summary"
  rm -rf "$d"
}

test_run_suite_records_the_wall_time_and_the_exit_code() {
  local d row
  d=$(mktemp -d)
  (BATON_TEST_RESULTS=$d; . "$REPO/tests/lib/suite.sh"; run_suite t 30 sh -c 'sleep 1; exit 3') 2>/dev/null || true
  row=$(cat "$d/t.exit.tsv")
  echo "$row"
  expect_eq "$(cut -f1-4 <<<"$row")" "$(printf 'EXIT\tt\t3\tsh -c sleep 1; exit 3')" "the EXIT row"
  local wall
  wall=$(cut -f5 <<<"$row")
  { [ "$wall" -ge 1 ] && [ "$wall" -le 20 ]; } || fail "wall time '$wall' is not the 1 s the suite took (20 s allowed for a loaded machine)"
  rm -rf "$d"
}
