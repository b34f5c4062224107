# shellcheck shell=bash
# examples/train.sbatch and train_ddp.sbatch when `baton nodes` fails
# (issue 43, item 3): a bad option (exit 2: BATON_STEP_NODES=0,
# BATON_MIN_NODES above BATON_STEP_NODES, not a number) ends the job with 2,
# not requeued; what a requeue can cure (too few nodes, Slurm silent: exit 1)
# exits 75. Runs the scripts outside Slurm with the real baton command; srun
# and scontrol are stand-ins that record a call (none must come). Sourced by
# tests/lib/run-cases.

BATON=${BATON_BUILD_DIR:?}/cli/baton
WORK=$BATON_TEST_RESULTS/sbatch-nodes
mkdir -p "$WORK/bin"
# Stand-ins: a step must never start in these cases.
for tool in srun scontrol; do
  printf '#!/bin/sh\necho "%s $*" >>"%s/calls"\nexit 0\n' "$tool" "$WORK" >"$WORK/bin/$tool"
  chmod +x "$WORK/bin/$tool"
done

# run_script SCRIPT [VAR=VALUE...]: the batch script as Slurm would start
# it, in one allocation of 2 nodes; sets RC and OUT.
run_script() {
  local script=$1
  shift
  rm -f "$WORK/calls"
  RC=0
  # SLURM_CONF names no file: baton nodes answers 1 ("names no file") without
  # waiting for a controller, as when Slurm does not answer.
  OUT=$(env -i PATH="$WORK/bin:/usr/bin:/bin" HOME="$WORK" SLURM_JOB_ID=4242 SLURM_JOB_NUM_NODES=2 \
    SLURM_JOB_NODELIST='n[1-2]' SLURM_CONF="$WORK/no-slurm.conf" BATON_CLI="$BATON" BATON_CKPT_DIR="$WORK/ckpt" \
    "$@" timeout 60 bash "$REPO/examples/$script" --steps 1 2>&1) || RC=$?
}

no_step_started() {
  if [ -e "$WORK/calls" ] && grep -q '^srun' "$WORK/calls"; then
    fail "a step was launched: $(cat "$WORK/calls")"
  fi
}

# expect_refused SCRIPT WHAT VAR=VALUE...: exit 2, the script names the values.
expect_refused() {
  local script=$1 what=$2
  shift 2
  run_script "$script" "$@"
  echo "$OUT"
  expect_eq "$RC" 2 "$script's exit status for $what"
  grep -q 'baton nodes refused BATON_STEP_NODES=.* (exit 2, see above): not requeued' <<<"$OUT" ||
    fail "$script does not say why it is not requeued ($what)"
  no_step_started
}

test_train_sbatch_a_bad_node_count_is_not_requeued() {
  expect_refused train.sbatch "BATON_STEP_NODES=0" BATON_STEP_NODES=0
  grep -q -- '--count 0: at least 1' <<<"$OUT" || fail "baton nodes' reason is not shown"
}

test_train_sbatch_more_min_than_step_nodes_is_not_requeued() {
  expect_refused train.sbatch "BATON_MIN_NODES > BATON_STEP_NODES" BATON_STEP_NODES=2 BATON_MIN_NODES=3
  grep -q -- '--min 3 is more than --count 2' <<<"$OUT" || fail "baton nodes' reason is not shown"
}

test_train_sbatch_a_non_numeric_count_is_not_requeued() {
  expect_refused train.sbatch "BATON_STEP_NODES=two" BATON_STEP_NODES=two
}

test_train_sbatch_slurm_silent_is_requeued() {
  run_script train.sbatch
  echo "$OUT"
  expect_eq "$RC" 75 "train.sbatch's exit status when baton nodes gets no answer (exit 1)"
  grep -q 'or Slurm did not answer (baton nodes exit 1): exiting 75 to be requeued' <<<"$OUT" ||
    fail "train.sbatch does not say why it requeues"
  no_step_started
}

test_train_ddp_sbatch_a_bad_node_count_is_not_requeued() {
  expect_refused train_ddp.sbatch "BATON_STEP_NODES=0" BATON_STEP_NODES=0
}

test_train_ddp_sbatch_more_min_than_step_nodes_is_not_requeued() {
  expect_refused train_ddp.sbatch "BATON_MIN_NODES > BATON_STEP_NODES" BATON_STEP_NODES=1 BATON_MIN_NODES=2
}

test_train_ddp_sbatch_slurm_silent_is_requeued() {
  run_script train_ddp.sbatch
  echo "$OUT"
  expect_eq "$RC" 75 "train_ddp.sbatch's exit status when baton nodes gets no answer (exit 1)"
  no_step_started
}

# baton step-end: the record the report reads, without Slurm's answer here
# (the record says so), and its refusals.
test_step_end_records_without_slurm_and_refuses_bad_values() {
  local d=$WORK/step-end rc=0 out
  rm -rf "$d"
  mkdir -p "$d"
  SLURM_CONF="$WORK/no-slurm.conf" SLURM_JOB_ID=77 SLURM_RESTART_COUNT=2 \
    "$BATON" step-end --exit 137 --nodes 'n[1-2]' --said 'srun: error: n2: task 1: Killed' --dir "$d" ||
    fail "step-end failed"
  cat "$d/events/77-batch.jsonl"
  /usr/bin/python3 - "$d/events/77-batch.jsonl" <<'PY' || fail "the record is not as documented"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1, lines
r = json.loads(lines[0])
assert r["ev"] == "step_end" and r["job"] == "77" and r["restart"] == 2 and r["exit"] == 137, r
assert r["nodes"] == "n[1-2]" and r["said"] == "srun: error: n2: task 1: Killed", r
assert "lost" not in r and "SLURM_CONF" in r["slurm_error"], r
PY
  rc=0; out=$("$BATON" step-end --exit 300 --nodes n1 --dir "$d" --job 1 2>&1) || rc=$?
  expect_eq "$rc" 2 "exit status for --exit 300"
  grep -q "exit '300'" <<<"$out" || fail "the bad value is not named: $out"
  rc=0; out=$(env -u BATON_CKPT_DIR "$BATON" step-end --exit 1 --nodes n1 --job 1 2>&1) || rc=$?
  expect_eq "$rc" 2 "exit status without a directory"
  grep -q BATON_CKPT_DIR <<<"$out" || fail "the message does not say how to name the directory: $out"
}
