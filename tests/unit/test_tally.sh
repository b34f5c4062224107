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
  expect_eq "$(tail -n 1 <<<"$out")" "0 passed, 1 failed, 1 skipped" "summary"
  grep -q 'failed in: mpi-np3 (ran in mpi-np3,mpi-np8)' <<<"$out" || fail "the failing launch is not named"
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
