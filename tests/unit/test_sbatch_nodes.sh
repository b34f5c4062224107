# shellcheck shell=bash
# `baton run` before it launches anything (issue 47; the examples' job
# scripts are a few lines around it): bad options end the job with 2, not
# requeued; what a requeue can cure (too few nodes, Slurm silent) exits 75;
# outside an allocation, or without a program, 2. Runs the job scripts and
# the command outside Slurm with the real baton command; srun and scontrol
# are stand-ins that record a call (none must come). And `baton step-end`.
# Sourced by tests/lib/run-cases.

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
  # SLURM_CONF names no file: baton run answers without waiting for a
  # controller, as when Slurm does not answer.
  OUT=$(env -i PATH="$WORK/bin:/usr/bin:/bin" HOME="$WORK" SLURM_JOB_ID=4242 SLURM_JOB_NUM_NODES=2 \
    SLURM_JOB_NODELIST='n[1-2]' SLURM_CONF="$WORK/no-slurm.conf" BATON_CLI="$BATON" BATON_CKPT_DIR="$WORK/ckpt" \
    "$@" timeout 60 bash "$REPO/examples/$script" --steps 1 2>&1) || RC=$?
}

no_step_started() {
  if [ -e "$WORK/calls" ] && grep -q '^srun' "$WORK/calls"; then
    fail "a step was launched: $(cat "$WORK/calls")"
  fi
}

# expect_refused SCRIPT WHY BATON_RUN_OPTS: exit 2, baton run names the value.
expect_refused() {
  local script=$1 why=$2
  run_script "$script" BATON_RUN_OPTS="$3"
  echo "$OUT"
  expect_eq "$RC" 2 "$script's exit status for BATON_RUN_OPTS='$3'"
  grep -qF -- "baton run: $why" <<<"$OUT" || fail "$script does not say why ('$why')"
  no_step_started
}

test_train_sbatch_a_bad_node_count_is_not_requeued() {
  expect_refused train.sbatch "--step-nodes 0: at least 1" "--step-nodes 0"
}

test_train_sbatch_more_min_than_step_nodes_is_not_requeued() {
  expect_refused train.sbatch "--min-nodes 3 is more than --step-nodes 2" "--step-nodes 2 --min-nodes 3"
}

test_train_sbatch_a_non_numeric_count_is_not_requeued() {
  expect_refused train.sbatch "the argument ('two') for option '--step-nodes' is invalid" "--step-nodes two"
}

test_train_sbatch_an_unknown_option_is_not_requeued() {
  expect_refused train.sbatch "unrecognised option '--step-node'" "--step-node 2"
}

test_train_sbatch_slurm_silent_is_requeued() {
  run_script train.sbatch
  echo "$OUT"
  expect_eq "$RC" 75 "train.sbatch's exit status when Slurm does not answer"
  grep -q '^\[baton run .* job 4242 restart 0\] fewer than 2 node(s) of the allocation can run a step, or Slurm did not answer (.*no-slurm.conf.* names no file): exiting 75 to be requeued$' <<<"$OUT" ||
    fail "baton run does not say why it requeues"
  no_step_started
}

test_train_ddp_sbatch_a_bad_node_count_is_not_requeued() {
  expect_refused train_ddp.sbatch "--step-nodes 0: at least 1" "--step-nodes 0"
}

test_train_ddp_sbatch_more_min_than_step_nodes_is_not_requeued() {
  expect_refused train_ddp.sbatch "--min-nodes 2 is more than --step-nodes 1" "--step-nodes 1 --min-nodes 2"
}

test_fsdp_and_lightning_sbatch_slurm_silent_is_requeued() {
  local script
  for script in train_ddp.sbatch train_fsdp.sbatch train_lightning.sbatch; do
    run_script "$script"
    echo "$OUT"
    expect_eq "$RC" 75 "$script's exit status when Slurm does not answer"
    no_step_started
  done
}

# baton run itself: outside an allocation, without a program, a negative
# cap, --help; the program's own options are never read as baton run's.
test_baton_run_refuses_what_it_cannot_run() {
  local rc out
  rc=0; out=$(env -u SLURM_JOB_ID "$BATON" run -- true 2>&1) || rc=$?
  expect_eq "$rc" 2 "exit status outside an allocation"
  grep -q "SLURM_JOB_ID is not set: baton run runs inside a job's allocation" <<<"$out" || fail "$out"
  rc=0; out=$(SLURM_JOB_ID=7 SLURM_JOB_NUM_NODES=1 "$BATON" run --max-restarts 2 2>&1) || rc=$?
  expect_eq "$rc" 2 "exit status without a program"
  grep -q "no program to run" <<<"$out" || fail "$out"
  rc=0; out=$(SLURM_JOB_ID=7 SLURM_JOB_NUM_NODES=1 "$BATON" run --max-restarts -1 true 2>&1) || rc=$?
  expect_eq "$rc" 2 "exit status for --max-restarts -1"
  grep -q -- "--max-restarts -1: 0 or more" <<<"$out" || fail "$out"
  rc=0; out=$(SLURM_JOB_ID=x7 "$BATON" run true 2>&1) || rc=$?
  expect_eq "$rc" 2 "exit status for SLURM_JOB_ID=x7"
  grep -q "SLURM_JOB_ID='x7' is not a job id" <<<"$out" || fail "$out"
  out=$("$BATON" run --help) || fail "baton run --help failed"
  grep -q -- "--min-nodes" <<<"$out" || fail "--help does not list the options: $out"
  # The program's options (--step-nodes 0 here) are the program's: only the
  # missing controller stops this one (75), not an option error (2).
  rc=0
  out=$(env -i PATH="$WORK/bin:/usr/bin:/bin" SLURM_JOB_ID=7 SLURM_JOB_NUM_NODES=1 SLURM_CONF="$WORK/no-slurm.conf" \
    "$BATON" run --max-restarts 1 my-prog --step-nodes 0 2>&1) || rc=$?
  echo "$out"
  expect_eq "$rc" 75 "exit status with the program's own options"
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
