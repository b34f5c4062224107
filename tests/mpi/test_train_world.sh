# shellcheck shell=bash
# Shell cases for examples/baton-train across world sizes (run by
# tests/mpi/train-world.sh through tests/lib/run-cases): the same options
# give the same final checksum at 1, 2, 3 and 4 ranks, uninterrupted and
# stopped at one world size then resumed at another (3 -> 2, 2 -> 3,
# 4 -> 3 -> 2), since the global batch is split into micro-batches that do
# not depend on the world size and their gradients are summed in
# micro-batch order (examples/train/ordered_sum.h).

TRAIN=${BATON_BUILD_DIR:?}/examples/baton-train
BATON=$BATON_BUILD_DIR/cli/baton
MPIRUN_RANKS=$REPO/tests/lib/mpirun-ranks
WORK=$BATON_TEST_RESULTS/train-world
# Short: a small model, 12 micro-batches of 8 samples (blocks of 12, 6, 4
# and 3 at 1-4 ranks; of 2 and 3 at 5), a checkpoint every 4 steps, a
# step= line after each step.
STEPS=24
OPTS=(--hidden 64 --global-batch 96 --micro-batches 12 --ckpt-every 4 --progress 0)

mkdir -p "$WORK"
data() {
  [ -f "$WORK/data.bin" ] || "$TRAIN" --make-data "$WORK/data.bin" --samples 1024 --features 64 >/dev/null
  echo "$WORK/data.bin"
}

# train RANKS CKPT_DIR OUT [ARGS...]: one run; fails the case unless it exits 0.
train() {
  local n=$1 dir=$2 out=$3
  shift 3
  "$MPIRUN_RANKS" "$n" "$TRAIN" --data "$(data)" --ckpt-dir "$dir" --steps "$STEPS" "${OPTS[@]}" "$@" >"$out" 2>&1 ||
    { cat "$out"; fail "the run at $n ranks ($*) failed"; }
}

# The one checksum every rank of OUT printed (fails unless RANKS ranks agree).
checksum() {
  local out=$1 n=$2
  expect_eq "$(grep -c '^final_checksum=' "$out")" "$n" "ranks that printed a checksum in $out"
  expect_eq "$(sed -n 's/^final_checksum=//p' "$out" | sort -u | wc -l)" 1 "distinct checksums in $out"
  sed -n 's/^final_checksum=//p' "$out" | sort -u
}

reference() {  # the uninterrupted 3-rank run's checksum, once per suite
  local f=$WORK/reference
  if [ ! -s "$f" ]; then
    rm -rf "$f.ckpt"
    train 3 "$f.ckpt" "$f.out"
    checksum "$f.out" 3 >"$f"
  fi
  cat "$f"
}

# chain NAME N1:STEP1 N2:STEP2 ... NK: a run at N1 ranks to step STEP1, then
# at N2 ranks (resumed) to STEP2, ..., the last at NK ranks to the end; each
# resumed run must say it resumed from the step before, and the end must
# have the reference's checksum.
chain() {
  local name=$1 dir=$WORK/$1 prev='' i=0 n at
  shift
  rm -rf "$dir" "$dir".*.out
  for hop in "$@"; do
    i=$((i + 1))
    n=${hop%%:*} at=$STEPS
    [ "$hop" != "$n" ] && at=${hop#*:}
    train "$n" "$dir" "$dir.$i.out" --steps "$at"
    if [ -n "$prev" ]; then
      grep -q "^resumed from step $prev (restart 0)$" "$dir.$i.out" ||
        fail "run $i at $n ranks: expected 'resumed from step $prev', got: $(grep -E '^(resumed|no checkpoint)' "$dir.$i.out")"
      expect_eq "$(grep -m 1 -o '^step=[0-9]*' "$dir.$i.out")" "step=$((prev + 1))" "first step of run $i"
    fi
    echo "run $i: $n ranks to step $at"
    prev=$at
  done
  expect_eq "$(checksum "$dir.$i.out" "$n")" "$(reference)" "final checksum of $name"
}

test_uninterrupted_runs_at_1_2_3_4_ranks_end_with_the_same_weights() {
  local ref n
  ref=$(reference)
  for n in 1 2 4; do
    rm -rf "$WORK/np$n"
    train "$n" "$WORK/np$n" "$WORK/np$n.out"
    expect_eq "$(checksum "$WORK/np$n.out" "$n")" "$ref" "final checksum at $n ranks"
  done
  # The loss of every step is the same number too (it is summed in micro-batch order).
  diff <(sed -n 's/^step=\([0-9]*\) loss=\([0-9.]*\) .*/\1 \2/p' "$WORK/reference.out") \
       <(sed -n 's/^step=\([0-9]*\) loss=\([0-9.]*\) .*/\1 \2/p' "$WORK/np1.out") ||
    fail "the losses at 1 rank differ from those at 3"
  echo "1, 2, 3 and 4 ranks: final checksum $ref"
}

test_uneven_blocks_5_ranks_over_12_micro_batches() {
  rm -rf "$WORK/np5"
  train 5 "$WORK/np5" "$WORK/np5.out"
  expect_eq "$(checksum "$WORK/np5.out" 5)" "$(reference)" "final checksum at 5 ranks (blocks of 2 and 3 micro-batches)"
}

test_stopped_at_3_ranks_resumed_at_2() { chain 3to2 3:10 2; }
test_stopped_at_2_ranks_resumed_at_3() { chain 2to3 2:9 3; }
test_4_then_3_then_2_ranks() { chain 4to3to2 4:6 3:15 2; }

test_agreed_stop_at_3_ranks_then_resume_at_1() {
  local dir=$WORK/stop rc=0 stopped
  rm -rf "$dir"
  : >"$dir.out"
  "$MPIRUN_RANKS" 3 "$TRAIN" --data "$(data)" --ckpt-dir "$dir" --steps "$STEPS" "${OPTS[@]}" --step-ms 100 \
    >"$dir.out" 2>&1 &
  local pid=$!
  timeout 120 tail --pid="$pid" -n +1 -f "$dir.out" | grep -m 1 -qE '^step=5 ' || true
  kill -USR2 "$pid"
  wait "$pid" || rc=$?
  expect_eq "$rc" 75 "exit status after an agreed stop"
  stopped=$(sed -n 's/^stop agreed at step \([0-9]*\):.*/\1/p' "$dir.out")
  [ -n "$stopped" ] || { cat "$dir.out"; fail "no 'stop agreed' line"; }
  train 1 "$dir" "$dir.resumed.out"
  grep -q "^resumed from step $stopped (restart 0)$" "$dir.resumed.out" || fail "not resumed from step $stopped"
  grep -q "^saved by 3 ranks, resumed by 1: " "$dir.resumed.out" || fail "no line saying the world size changed"
  expect_eq "$(checksum "$dir.resumed.out" 1)" "$(reference)" "final checksum after a stop at 3 ranks, resumed at 1"
}

test_ring_reduce_runs_and_is_named_in_the_checkpoint() {
  local dir=$WORK/ring out rc=0
  rm -rf "$dir"
  train 2 "$dir" "$dir.out" --reduce ring --steps 6
  out=$("$MPIRUN_RANKS" 2 "$TRAIN" --data "$(data)" --ckpt-dir "$dir" --steps "$STEPS" "${OPTS[@]}" 2>&1) || rc=$?
  expect_eq "$rc" 2 "exit status when resuming a --reduce ring run with --reduce ordered"
  echo "$out" | grep -q -- "made with --reduce ring (this run: ordered)" || fail "the option is not named: $out"
}

test_refusals_name_the_value() {
  local out rc=0
  out=$("$MPIRUN_RANKS" 3 "$TRAIN" --data "$(data)" --ckpt-dir "$WORK/never" "${OPTS[@]}" --micro-batches 2 \
        --global-batch 96 2>&1) || rc=$?
  expect_eq "$rc" 2 "exit status with more ranks than micro-batches"
  echo "$out" | grep -q "3 ranks for --micro-batches 2: a rank would have no micro-batch" || fail "not named: $out"
  rc=0; out=$("$TRAIN" --data "$(data)" --ckpt-dir "$WORK/never" --global-batch 96 --micro-batches 7 2>&1) || rc=$?
  expect_eq "$rc" 2 "exit status when --micro-batches does not divide --global-batch"
  echo "$out" | grep -qF -- "--micro-batches: '7' does not divide --global-batch 96" || fail "not named: $out"
  rc=0; out=$("$TRAIN" --data "$(data)" --ckpt-dir "$WORK/never" --batch 32 2>&1) || rc=$?
  expect_eq "$rc" 2 "exit status for the old --batch"
  echo "$out" | grep -qF -- "--batch (samples per rank) is gone: give --global-batch N" || fail "no hint: $out"
  rc=0; out=$("$TRAIN" --data "$(data)" --ckpt-dir "$WORK/never" --global-batch 2048 --micro-batches 1 2>&1) || rc=$?
  expect_eq "$rc" 2 "exit status for a global batch larger than the data set"
  echo "$out" | grep -qF -- "--global-batch 2048 is more than the 1024 samples" || fail "not named: $out"
  [ ! -e "$WORK/never" ] || fail "a refused run created its checkpoint directory"
}

test_progress_lines_instead_of_a_line_per_step() {
  local dir=$WORK/progress
  rm -rf "$dir"
  # OPTS' --progress 0 overridden: a line at the first and the last step only (the period is long).
  train 1 "$dir" "$dir.out" --progress 3600
  cat "$dir.out"
  ! grep -q '^step=' "$dir.out" || fail "step= lines with --progress 3600"
  expect_eq "$(grep -cE '^step [0-9]+/24 \([0-9.]+%\)  loss [0-9.]+  [0-9.]+ steps/s  ETA ' "$dir.out")" 2 "progress lines"
  grep -qE '^step 1/24 \(4\.2%\)  loss ' "$dir.out" || fail "no line for the first step"
  grep -qE '^step 24/24 \(100\.0%\)  loss [0-9.]+  [0-9.]+ steps/s  ETA 0:00:00$' "$dir.out" || fail "no line for the last step"
}
