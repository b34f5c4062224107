# shellcheck shell=bash
# The seeded fault campaign's trials (bash, sourced by scripts/fault-campaign
# and tests/cluster/test_fault.sh after tests/lib/cases.sh and
# tests/cluster/lib.sh; the local cluster is running). One trial = one short
# job of examples/train.sbatch (3 ranks on 3 of the 4 nodes) and one fault,
# all of whose choices (the kind, the rank, the step and the delay after it,
# the byte of a shard) come from the trial's seed: the same seed injects the
# same fault at the same moment. A trial passes when the job ends in a restore
# of a committed version whose final checksum equals the uninterrupted run's
# (bit-exact), the version restored being the newest committed one when the
# faulted run was gone (nothing committed lost), or the version before it
# when the fault destroyed the newest. A fault the job cannot run through
# must end it with an error that names the cause; the campaign then lifts the
# fault and the next run must restore as above.

FAULT_KINDS=(kill9 sigstop kill-node fs-full read-only bitflip truncate drop-unsynced)

# Short trials: 40 steps, a checkpoint every 5, a tiny model; a collective
# deadline of 8 s for the stopped rank. The last fault moment is step 25:
# 15 steps (some 2 s) of margin for the harness, whose polls (squeue, grep)
# take up to a second each on a loaded 2-core machine (with 30 steps, seed
# 1065's kill-node came after the job had completed).
WORK=${FAULT_WORK:?}
mkdir -p "$WORK"
chmod 755 "$WORK"
STEPS=40
OPTS=(--ckpt-every 5 --hidden 64 --progress 0)  # --progress 0: the step=N lines read here
STEP_MS=100
COLLECTIVE_TIMEOUT=8

. "$REPO/tests/cluster/train-lib.sh"

# rnd SEED SALT N: a number in [0, N), from splitmix64 of SEED and SALT (bash
# arithmetic: 64-bit, wrapping; >> made logical by masks), so every machine
# draws the same.
rnd() {
  local z=$(($1 * 0x9E3779B97F4A7C15 + $2 * 0x632BE59BD9B4E019 + 0x94D049BB133111EB))
  z=$(((z ^ ((z >> 30) & 0x3FFFFFFFF)) * 0xBF58476D1CE4E5B9))
  z=$(((z ^ ((z >> 27) & 0x1FFFFFFFFF)) * 0x94D049BB133111EB))
  z=$((z ^ ((z >> 31) & 0x1FFFFFFFF)))
  echo $(((z & 0x7FFFFFFFFFFFFFFF) % $3))
}

# plan SEED: sets KIND, RANK, AT (the step), DELAY_MS (after it) and, with
# FAULT_KIND set, that kind whatever the seed draws.
plan() {
  KIND=${FAULT_KIND:-${FAULT_KINDS[$(rnd "$1" 1 ${#FAULT_KINDS[@]})]}}
  RANK=$(rnd "$1" 2 3)
  AT=$((6 + $(rnd "$1" 3 20)))
  case $KIND in bitflip|truncate) AT=$((11 + $(rnd "$1" 3 15))) ;; esac  # two versions before it
  DELAY_MS=$(rnd "$1" 4 100)
}

# The current run printed step STEP (polled every 0.1 s: a step takes ~0.1 s).
wait_moment() {
  local out=$1 step=$2 t0=$SECONDS
  until reached "$out" "$step"; do
    [ $((SECONDS - t0)) -lt 120 ] || fail "timed out after 120s waiting for step $step"
    job_state_is "$JOB" COMPLETED && fail "job $JOB completed before step $step"
    sleep 0.1
  done
}

# Complete versions, oldest first: seq, step, path per line.
committed() {
  "$BATON" ckpt ls "$1" --json | perl -MJSON::PP -e '
    print "$_->{seq} $_->{step} $_->{path}\n" for sort { $a->{seq} <=> $b->{seq} }
      grep { $_->{status} eq "complete" } @{ decode_json(join "", <STDIN>) }'
}

# The run after the fault ended the first: it ended with an error naming
# WHAT (regular expression), or it was requeued. Waits for either.
requeued_or_failed() { restarts_above "$1" "$2" || job_state_is "$1" FAILED; }

# The cluster's small shared file system (scripts/local-cluster: a 4 MiB
# tmpfs every node sees) for the full and read-only faults.
SMALLFS=$(dirname "$SLURM_CONF")/smallfs

# trial SEED: one trial; writes DIR/result: kind rank at delay outcome
# restored hit (the step the faulted run had printed once the fault was in).
trial() {
  begin_case
  local seed=$1 d job pid node r run want ck
  plan "$seed"
  d=$(case_dir)
  [ -z "${FAULT_TRIAL_DIR_FILE:-}" ] || echo "$d" >"$FAULT_TRIAL_DIR_FILE"
  echo "trial seed $seed: $KIND of rank $RANK after step $AT + ${DELAY_MS} ms in $d"
  reference "$STEPS" >/dev/null
  case $KIND in
    fs-full|read-only)
      mountpoint -q "$SMALLFS" || fail "no $SMALLFS: a cluster started by an older scripts/local-cluster?"
      mount -o remount,rw "$SMALLFS"
      rm -rf "${SMALLFS:?}"/*
      CASE_CKPT=$SMALLFS/ckpt-$seed ;;
    drop-unsynced)
      export SUBMIT_TRAIN=$REPO/tests/fault/train-wrapper FAULT_RANK=$RANK FAULT_REAL_TRAIN=$TRAIN \
        FAULT_JOURNAL=$d/journal FAULT_PRELOAD=$BATON_BUILD_DIR/tests/fault/.libs/drop_unsynced.so
      [ -f "$FAULT_PRELOAD" ] || fail "no $FAULT_PRELOAD (make in $BATON_BUILD_DIR)" ;;
  esac
  ck=$(ckpt_dir "$d")
  mkdir -p "$ck"
  submit "$d" "$STEPS"
  job=$JOB
  wait_moment "$d/out" "$AT"
  sleep "$(printf '0.%03d' "$DELAY_MS")"
  pid=$(rank_pid "$job" "$RANK") ||
    fail "rank $RANK of job $job is gone before the fault (its run printed step $(run_out "$d/out" "$(runs "$d/out")" | last_step)): the harness came too late"
  before_fault "$job" "$d" 1
  read -r r run <"$d/fault.1"
  # drop-unsynced: the kill comes as the rank next writes under the
  # checkpoint directory (its journal grows), so that a save is under way and
  # it has writes not yet synced to lose (a save takes some 30 ms here).
  [ "$KIND" != drop-unsynced ] || wait_journal_grows "$d/journal"
  case $KIND in
    kill9|bitflip|truncate|drop-unsynced|read-only) kill -9 "$pid" ;;
    sigstop) kill -STOP "$pid" ;;
    kill-node)
      node=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | sed -n 's/^SLURMD_NODENAME=//p')
      [ -n "$node" ] || fail "rank $RANK (pid $pid) of job $job ended before its node could be read"
      kill_node "$node" ;;
    fs-full) dd if=/dev/zero of="$SMALLFS/filler" bs=64k 2>/dev/null || true ;;
  esac
  HIT=$(run_out "$d/out" "$run" | last_step)  # the step printed when the fault was in
  echo "fault injected at step $HIT of run $run"
  case $KIND in
    fs-full)
      # The next save fails: the run must end saying why; the fault is
      # lifted once the run is gone.
      wait_for 120 "the faulted run to end" requeued_or_failed "$job" "$r"
      fault_named "$d/out" "$run" 'No space left on device'
      rm -f "$SMALLFS/filler"
      ;;
    read-only)
      # Killed, then the directory read-only while the job waits: the next
      # run must end saying why (the remount of a file system with files
      # open for writing is refused, so it cannot come under a live run).
      after_fault "$job" "$d" 1
      mount -o remount,ro "$SMALLFS"
      r=$(job_field "$job" Restarts) run=$((run + 1))
      wait_for 120 "the run on the read-only directory to end" requeued_or_failed "$job" "$r"
      fault_named "$d/out" "$run" 'Read-only file system'
      mount -o remount,rw "$SMALLFS"
      ;;
    *) after_fault "$job" "$d" 1 ;;
  esac
  case $KIND in
    sigstop) [ ! -e "/proc/$pid" ] || fail "the stopped rank $pid outlived its step" ;;
    kill-node)
      read -r r run want <"$d/fault.1"
      wait_for 60 "the requeued run to start" runs_at_least "$d/out" $((run + 1))
      revive_node "$node" ;;
    bitflip|truncate) corrupt_newest "$seed" "$d" ;;
    drop-unsynced) "$REPO/tests/fault/revert-unsynced" "$d/journal" ;;
  esac
  case $KIND in
    fs-full|read-only)
      # The version restored: the newest committed once the fault is lifted.
      want=$(newest_committed "$ck")
      if job_state_is "$job" FAILED; then
        # An error the job does not run through (exit 1): submitted again,
        # by hand as a user would, it must restore that version.
        echo "job $job failed with exit $(job_field "$job" ExitCode) after $KIND; submitting it again"
        submit "$d" "$STEPS"
        restores_after "$JOB" "$d" 0 "$want"
        echo "$KIND $RANK $AT $DELAY_MS error+resubmit $want $HIT" >"$d/result"
      else
        restores_after "$job" "$d" "$run" "$want"
        echo "$KIND $RANK $AT $DELAY_MS error+requeue $want $HIT" >"$d/result"
      fi ;;
    *)
      check_job "$job" "$d" 1 "$STEPS"
      read -r r run want <"$d/fault.1"
      echo "$KIND $RANK $AT $DELAY_MS restored $want $HIT" >"$d/result" ;;
  esac
  echo "trial seed $seed passed: $(cat "$d/result")"
}

# wait_journal_grows JOURNAL: polls every 5 ms until JOURNAL grows.
wait_journal_grows() {
  local size t0=$SECONDS
  size=$(stat -c %s "$1" 2>/dev/null || echo 0)
  while [ "$(stat -c %s "$1" 2>/dev/null || echo 0)" -le "$size" ]; do
    [ $((SECONDS - t0)) -lt 60 ] || fail "the journal $1 did not grow in 60 s"
    sleep 0.005
  done
}

# fault_named OUT RUN WHAT: run RUN's output names the fault's cause.
fault_named() {
  local out
  out=$(run_out "$1" "$2")
  grep -F "$3" <<<"$out" >/dev/null || { tail -n 20 <<<"$out"; fail "run $2 did not say '$3'"; }
  echo "run $2 said: $(grep -F "$3" <<<"$out" | head -n 1)"
}

# restores_after JOB DIR RUN STEP: JOB completes; the first of its runs after
# run RUN of DIR/out that started baton-train resumed from STEP; its final
# checksum is the reference's.
restores_after() {
  local job=$1 d=$2 after=$3 want=$4 got mine
  wait_for 180 "job $job to complete" job_state_is "$job" COMPLETED
  mine=$(awk -v j="$job" -v a="$after" '/^\[baton run .*\] start on / { n++; mine = (n > a && $0 ~ " job " j " ") } mine' "$d/out")
  got=$(sed -n 's/^resumed from step \([0-9]*\) .*/\1/p' <<<"$mine" | head -n 1)
  expect_eq "$got" "$want" "step job $job resumed from after the fault"
  expect_eq "$(sed -n 's/^final_checksum=//p' <<<"$mine" | sort -u)" "$(reference "$STEPS")" "final checksum of job $job"
}

# corrupt_newest SEED DIR: flips a bit of, or truncates, a shard of the
# newest committed version (the faulted run is gone, the next not started);
# the next run must restore the version before it.
corrupt_newest() {
  local seed=$1 d=$2 r run want vs path shards shard size
  read -r r run want <"$d/fault.1"
  mapfile -t vs < <(committed "$d/ckpt")
  [ "${#vs[@]}" -ge 2 ] || fail "fewer than two committed versions to fall back on: ${vs[*]}"
  path=$(cut -d' ' -f3 <<<"${vs[-1]}")
  mapfile -t shards < <(ls "$path"/shard-*.h5)
  shard=${shards[$(rnd "$seed" 5 ${#shards[@]})]}
  size=$(stat -c %s "$shard")
  if [ "$KIND" = bitflip ]; then
    local off bit byte
    off=$(rnd "$seed" 6 "$size") bit=$(rnd "$seed" 7 8)
    byte=$(od -An -tu1 -j "$off" -N1 "$shard" | tr -d ' ')
    printf '%b' "$(printf '\\%03o' $((byte ^ (1 << bit))))" | dd of="$shard" bs=1 seek="$off" conv=notrunc 2>/dev/null
    echo "flipped bit $bit of byte $off of $shard ($size bytes)"
  else
    local to
    to=$(rnd "$seed" 6 "$size")
    truncate -s "$to" "$shard"
    echo "truncated $shard from $size to $to bytes"
  fi
  want=$(cut -d' ' -f2 <<<"${vs[-2]}")
  echo "$r $run $want" >"$d/fault.1"
}

