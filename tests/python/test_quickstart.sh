# shellcheck shell=bash
# docs/python.md's quickstart: the FSDP2 program of "2. The program", taken
# from the page itself, runs at 2 ranks under mpirun (gloo, CPU), saves the
# versions it says, and a second run resumes at its last step and ends.

PY=${BATON_PYTHON:-/usr/bin/python3}
BATON=$BATON_BUILD_DIR/cli/baton
WORK=$BATON_TEST_RESULTS/quickstart

# The first ```python block after the "**2. The program**" line.
quickstart_program() {
  awk '/^\*\*2\. The program\*\*/ {found=1} found && /^```python$/ {inside=1; next}
       inside && /^```$/ {exit} inside {print}' "$REPO/docs/python.md"
}

run_it() {  # run_it LOG: the program at 2 ranks
  env -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT PYTHONPATH="$BATON_BUILD_DIR/python" \
    BATON_CKPT_DIR="$WORK/ckpt" BATON_COLLECTIVE_TIMEOUT=60 \
    timeout 240 "$REPO/tests/lib/mpirun-ranks" 2 "$PY" "$WORK/train.py" >"$1" 2>&1
}

test_the_quickstart_program_runs_and_resumes() {
  "$PY" -c 'import torch.distributed.fsdp as f; f.fully_shard' 2>/dev/null ||
    { echo "no torch with torch.distributed.fsdp.fully_shard for $PY"; exit 77; }
  rm -rf "$WORK"; mkdir -p "$WORK"
  quickstart_program >"$WORK/train.py"
  local lines; lines=$(wc -l <"$WORK/train.py")
  { [ "$lines" -ge 20 ] && [ "$lines" -le 40 ]; } || fail "the program is $lines lines: $(cat "$WORK/train.py")"
  run_it "$WORK/first.log" || fail "the first run failed: $(tail -n 30 "$WORK/first.log")"
  local steps
  steps=$("$BATON" ckpt ls "$WORK/ckpt" --json | "$PY" -c 'import json,sys; print(" ".join(str(v["step"]) for v in json.load(sys.stdin)))')
  expect_eq "$steps" "100 150 200" "the versions kept (keep=3 of 50, 100, 150, 200)"
  run_it "$WORK/second.log" || fail "the second run failed: $(tail -n 30 "$WORK/second.log")"
  local report
  report=$("$BATON" report "$WORK/ckpt") || fail "baton report failed: $report"
  echo "$report"
  grep -q "^  2\. .*restored step 200 from level 3, no steps, ended: end$" <<<"$report" || fail "the second launch did not restore step 200 and end"
  grep -q "^  1\. .*steps 1-200, ended: end$" <<<"$report" || fail "the first launch did not run steps 1-200"
}
