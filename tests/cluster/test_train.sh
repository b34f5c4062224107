# The main job on the local cluster: examples/train.sbatch running
# examples/baton-train, one fault per scenario (two in one). Each scenario
# checks three things: the final checksum equals the uninterrupted run's;
# the step a requeued run resumed from equals the newest version that
# `baton ckpt ls --json` listed once the faulted run was gone (and is not
# step 0); the job's Restarts equal the faults injected.
#
# Jobs run 3 ranks, one per node (-N3 of the 4 nodes). The uninterrupted
# reference runs once, under mpirun on the host: the ring reduction makes the
# sums independent of where the ranks run, and --step-ms only burns time, so
# it runs without it.

TRAIN=${BATON_BUILD_DIR:?}/examples/baton-train
BATON=$BATON_BUILD_DIR/cli/baton
SCRIPT=$REPO/examples/train.sbatch
WORK=$BATON_TEST_RESULTS/cluster-train
mkdir -p "$WORK"
chmod 755 "$WORK"

# Long enough to interrupt, short enough to keep the suite in minutes.
STEPS=100
OPTS=(--ckpt-every 10 --hidden 256)
STEP_MS=60

data() {
  [ -f "$WORK/data.bin" ] || "$TRAIN" --make-data "$WORK/data.bin" --samples 2048 >/dev/null
  echo "$WORK/data.bin"
}

reference() {  # reference STEPS [RANKS]: the uninterrupted run's checksum
  local n=$1 ranks=${2:-3} f=$WORK/reference-$1-np${2:-3}
  if [ ! -s "$f" ]; then
    rm -rf "$f.ckpt"
    "$REPO/tests/lib/mpirun-ranks" "$ranks" "$TRAIN" --data "$(data)" --ckpt-dir "$f.ckpt" --steps "$n" "${OPTS[@]}" \
      >"$f.out" 2>&1 || { cat "$f.out"; fail "the reference run failed"; }
    sed -n 's/^final_checksum=//p' "$f.out" | sort -u >"$f"
    [ "$(wc -l <"$f")" = 1 ] || fail "the reference's ranks disagree"
  fi
  cat "$f"
}

# Every case runs in its own subshell: at its exit, whatever it leaves is
# cleaned up, pass or fail (jobs cancelled, killed nodes revived), so the
# next case finds four idle nodes.
# begin_case: the first line of every case (traps are not inherited by the
# case's subshell).
begin_case() {
  CASE_JOBS='' CASE_DOWN=''
  trap cleanup EXIT
}
cleanup() {
  local j n
  for j in $CASE_JOBS; do scancel "$j" 2>/dev/null || true; done
  for n in $CASE_DOWN; do
    case $(sinfo -h -N -n "$n" -o %t | head -n 1) in
      down*|drain*|fail*) "$REPO/scripts/local-cluster" revive-node "$n" >&2 || true ;;
    esac
  done
}
kill_node() { CASE_DOWN="$CASE_DOWN $1"; "$REPO/scripts/local-cluster" kill-node "$1"; }
revive_node() { "$REPO/scripts/local-cluster" revive-node "$1"; }

# submit DIR STEPS [SBATCH OPTIONS...] [-- TRAIN OPTIONS...]: sets JOB.
submit() {
  local d=$1 steps=$2 sb=() tr=()
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do sb+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  tr=("$@")
  local job
  job=$(BATON_TRAIN=$TRAIN BATON_CKPT_DIR=$d/ckpt BATON_COLLECTIVE_TIMEOUT=10 \
    sbatch --parsable -N3 --ntasks-per-node=1 -o "$d/out" "${sb[@]}" "$SCRIPT" \
    --data "$(data)" --steps "$steps" --step-ms "$STEP_MS" "${OPTS[@]}" "${tr[@]}") || return 1
  CASE_JOBS="$CASE_JOBS $job"
  JOB=$job
  echo "submitted job $job"
}

# The output of the job's K-th run (K from 1), as the batch script starts each.
run_out() { [ -f "$1" ] && awk -v k="$2" '/^\[train.sbatch .*\] start on /{n++} n==k' "$1"; }
runs() { grep -c '^\[train.sbatch .*\] start on ' "$1" || true; }
# Predicates for wait_for (which runs its command again and again).
runs_at_least() { [ "$(runs "$1")" -ge "$2" ]; }
restarts_at_least() { [ "$(job_field "$1" Restarts)" -ge "$2" ] 2>/dev/null; }
last_step() { sed -n 's/^step=\([0-9]*\) .*/\1/p' | tail -n 1; }

# wait_step OUT K STEP: until run K printed a step >= STEP.
reached() { [ "$(run_out "$1" "$2" | last_step)" -ge "$3" ] 2>/dev/null; }
wait_step() { wait_for 120 "run $2 to reach step $3" reached "$@"; }

newest_committed() {
  "$BATON" ckpt ls "$1" --json | perl -MJSON::PP -e '
    my @c = sort { $a->{seq} <=> $b->{seq} } grep { $_->{status} eq "complete" } @{ decode_json(join "", <STDIN>) };
    print @c ? $c[-1]{step} : "none", "\n"'
}

# The pid of rank R of JOB, found by its environment (never by a pattern):
# this cluster's SLURM_CONF, the job id and the task id.
rank_pid() {
  local job=$1 r=$2 p
  for p in $(pgrep -x baton-train); do
    [ "$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
         grep -cxF -e "SLURM_JOB_ID=$job" -e "SLURM_PROCID=$r" -e "SLURM_CONF=$SLURM_CONF")" = 3 ] &&
      { echo "$p"; return 0; }
  done
  return 1
}
rank_node() { tr '\0' '\n' <"/proc/$(rank_pid "$1" "$2")/environ" | sed -n 's/^SLURMD_NODENAME=//p'; }

# after_fault JOB DIR K: once the job is requeued for the K-th time and its
# old run is gone, records the newest committed version for run K+1.
after_fault() {
  local job=$1 d=$2 k=$3
  wait_for 120 "job $job to be requeued ($k)" restarts_at_least "$job" "$k"
  wait_for 60 "job $job to be pending again" job_state_is "$job" PENDING
  newest_committed "$d/ckpt" >"$d/newest.$k"
  echo "after fault $k: newest committed version is step $(cat "$d/newest.$k")"
  [ "$(cat "$d/newest.$k")" != none ] || fail "no committed version before fault $k"
}

# Runs that died before baton-train started (no resume or first-run line):
# Open MPI's start-up crash on this one-machine cluster (docs/testing.md). A
# job survives it by its own requeue; it is counted and shown, not hidden.
launch_crashes() {
  local out=$1 k n=0
  for k in $(seq 1 "$(runs "$out")"); do
    if ! run_out "$out" "$k" | grep -qE '^(resumed from step|no checkpoint in) '; then
      n=$((n + 1))
      echo "run $k ended before baton-train started:" >&2
      run_out "$out" "$k" | grep -E 'Segmentation|srun: error|step ended' | head -n 3 >&2
    fi
  done
  echo "$n"
}

# check_job JOB DIR FAULTS STEPS [RANKS]: the job completed; run k+1 resumed from the
# newest version recorded after fault k; the checksum is the reference's;
# Restarts = FAULTS (+ launch crashes, listed).
check_job() {
  local job=$1 d=$2 faults=$3 steps=$4 ranks=${5:-3} k crashes restarts resumed want
  wait_for 180 "job $job to complete" job_state_is "$job" COMPLETED
  cat "$d/out"
  crashes=$(launch_crashes "$d/out")
  restarts=$(job_field "$job" Restarts)
  expect_eq "$restarts" "$((faults + crashes))" "Restarts of job $job ($faults faults, $crashes launch crashes)"
  # The resumes, in order, against the versions recorded after each fault.
  k=0
  while read -r resumed; do
    k=$((k + 1))
    [ -f "$d/newest.$k" ] || continue
    want=$(cat "$d/newest.$k")
    expect_eq "$resumed" "$want" "step resumed from after fault $k"
  done < <(sed -n 's/^resumed from step \([0-9]*\) (restart [0-9]*)$/\1/p' "$d/out")
  [ "$k" -ge "$faults" ] || fail "$k resumed runs for $faults faults"
  expect_eq "$(run_out "$d/out" "$(runs "$d/out")" | grep -c '^final_checksum=')" "$ranks" "checksum lines of the last run"
  expect_eq "$(sed -n 's/^final_checksum=//p' "$d/out" | sort -u)" "$(reference "$steps" "$ranks")" "final checksum"
  # Steps lost per fault: the last step a faulted run printed minus the step resumed from.
  for k in $(seq 1 "$faults"); do
    echo "fault $k: last step printed $(run_out "$d/out" "$k" | last_step), resumed from $(cat "$d/newest.$k" 2>/dev/null)"
  done
}

test_node_failure_with_a_spare_node_moves_the_job() {
  begin_case
  local d job node
  d=$(case_dir)
  reference "$STEPS" >/dev/null
  submit "$d" "$STEPS"
  job=$JOB
  wait_step "$d/out" 1 25
  node=$(rank_node "$job" 1)
  kill_node "$node"
  after_fault "$job" "$d" 1
  wait_for 60 "the requeued run to start" runs_at_least "$d/out" 2
  run_out "$d/out" 2 | grep -q "start on .*" || fail "no second run"
  revive_node "$node"
  check_job "$job" "$d" 1 "$STEPS"
  # The second run started while the node was down: it ran elsewhere.
  local nodes
  nodes=$(run_out "$d/out" 2 | sed -n 's/.*start on \([^ ]*\) at .*/\1/p')
  echo "killed $node; the second run ran on $nodes"
  [ "$(scontrol show hostnames "$nodes" | grep -cx "$node")" = 0 ] || fail "the job ran on $node again"
}

test_node_failure_without_a_spare_node_waits_for_revive() {
  begin_case
  local d job node
  d=$(case_dir)
  reference "$STEPS" 4 >/dev/null
  submit "$d" "$STEPS" -N4
  job=$JOB
  wait_step "$d/out" 1 25
  node=$(rank_node "$job" 2)
  kill_node "$node"
  after_fault "$job" "$d" 1
  # Three nodes left for a job of four: it waits, and no run starts.
  wait_for 60 "job $job to wait for nodes" job_reason_mentions "$job" 'Resources|ReqNodeNotAvail|DOWN'
  expect_eq "$(runs "$d/out")" 1 "runs while a node of four is down"
  expect_eq "$(job_field "$job" JobState)" PENDING "state while a node of four is down"
  revive_node "$node"
  check_job "$job" "$d" 1 "$STEPS" 4
}
job_reason_mentions() { job_field "$1" Reason | grep -qE "$2"; }

test_scontrol_requeue_stops_at_an_agreed_step_and_resumes() {
  begin_case
  local d job
  d=$(case_dir)
  reference "$STEPS" >/dev/null
  submit "$d" "$STEPS"
  job=$JOB
  wait_step "$d/out" 1 25
  scontrol requeue "$job"
  after_fault "$job" "$d" 1
  check_job "$job" "$d" 1 "$STEPS"
}

test_preemption_by_a_high_priority_job_stops_saves_and_resumes() {
  begin_case
  local d job high steps=250
  d=$(case_dir)
  reference "$steps" >/dev/null
  submit "$d" "$steps" -- --step-ms 100
  job=$JOB
  wait_step "$d/out" 1 15
  high=$(sbatch --parsable -p high -N4 -o "$d/high.out" --wrap 'echo high ran on $(hostname)')
  after_fault "$job" "$d" 1
  wait_for 120 "high-priority job $high to complete" job_state_is "$high" COMPLETED
  check_job "$job" "$d" 1 "$steps"
  grep -q 'DUE TO PREEMPTION' "$d/out" || fail "the job's output does not say it was preempted"
  # SIGTERM reached the ranks: they agreed on a step and saved it (GraceTime 10 s).
  local stop
  stop=$(run_out "$d/out" 1 | sed -n 's/^stop agreed at step \([0-9]*\):.*/\1/p')
  expect_eq "$stop" "$(cat "$d/newest.1")" "the step of the agreed stop, saved before the requeue"
  expect_eq "$(run_out "$d/out" 1 | last_step)" "$stop" "last step of the preempted run (no work lost)"
}

test_time_limit_signal_stops_saves_and_requeues() {
  begin_case
  local d job steps=250 signals k
  d=$(case_dir)
  reference "$steps" >/dev/null
  # USR2 50 s before a 1-minute limit: about 10-25 s into each run.
  submit "$d" "$steps" --time=1 --signal=B:USR2@50 -- --step-ms 150
  job=$JOB
  after_fault "$job" "$d" 1
  wait_for 240 "job $job to complete" job_state_is "$job" COMPLETED
  # A run that got the signal stopped at an agreed step; the next resumed there.
  signals=$(grep -c 'USR2 (time limit near): forwarding to the step' "$d/out")
  for k in $(seq 2 "$signals"); do
    run_out "$d/out" "$k" | sed -n 's/^stop agreed at step \([0-9]*\):.*/\1/p' >"$d/newest.$k"
  done
  check_job "$job" "$d" "$signals" "$steps"
  expect_eq "$(run_out "$d/out" 1 | sed -n 's/^stop agreed at step \([0-9]*\):.*/\1/p')" "$(cat "$d/newest.1")" \
    "the first run's agreed stop step"
  ! grep -q 'DUE TO TIME LIMIT' "$d/out" || fail "a run reached its time limit instead of stopping first"
}

test_sigkill_of_a_rank_ends_the_step_and_the_job_resumes() {
  begin_case
  local d job
  d=$(case_dir)
  reference "$STEPS" >/dev/null
  submit "$d" "$STEPS"
  job=$JOB
  wait_step "$d/out" 1 25
  kill -9 "$(rank_pid "$job" 1)"
  after_fault "$job" "$d" 1
  check_job "$job" "$d" 1 "$STEPS"
}

test_sigstopped_rank_is_caught_by_the_deadline_and_the_job_resumes() {
  begin_case
  local d job pid
  d=$(case_dir)
  reference "$STEPS" >/dev/null
  submit "$d" "$STEPS"
  job=$JOB
  wait_step "$d/out" 1 25
  pid=$(rank_pid "$job" 1)
  kill -STOP "$pid"
  # BATON_COLLECTIVE_TIMEOUT=10: the peers give up, exit 75, srun -K ends the stopped rank.
  after_fault "$job" "$d" 1
  [ ! -e "/proc/$pid" ] || fail "the stopped rank $pid outlived its step"
  check_job "$job" "$d" 1 "$STEPS"
  grep -q 'timed out after 10 s' "$d/out" || fail "no collective timeout in the output"
}

test_two_failures_in_a_row_a_rank_then_a_node() {
  begin_case
  local d job node
  d=$(case_dir)
  reference "$STEPS" >/dev/null
  submit "$d" "$STEPS"
  job=$JOB
  wait_step "$d/out" 1 15
  kill -9 "$(rank_pid "$job" 2)"
  after_fault "$job" "$d" 1
  wait_step "$d/out" 2 $(($(cat "$d/newest.1") + 15))
  node=$(rank_node "$job" 1)
  kill_node "$node"
  after_fault "$job" "$d" 2
  wait_for 60 "the third run to start" runs_at_least "$d/out" 3
  revive_node "$node"
  check_job "$job" "$d" 2 "$STEPS"
}

# --max-restarts 0: a restart that finds no newer checkpoint than the last
# one did stops the job. Run 1 saves step 10 and is killed; run 2 resumes
# step 10 (progress: run 1 had saved) and is killed before step 20; run 3
# finds step 10 again: it stops with exit 3, the job is not requeued, and its
# comment says why. Submitting the job again resumes it to the end.
test_restart_cap_stops_the_job_and_says_why() {
  begin_case
  local d job k again
  d=$(case_dir)
  reference "$STEPS" >/dev/null
  submit "$d" "$STEPS" -- --max-restarts 0 --ckpt-every 50
  job=$JOB
  for k in 1 2; do
    if [ "$k" = 1 ]; then
      wait_for 120 "the first checkpoint" grep -q '^checkpoint step=50 ' "$d/out"
    else
      wait_step "$d/out" 2 51
    fi
    kill -9 "$(rank_pid "$job" 1)"
    after_fault "$job" "$d" "$k"
  done
  wait_for 120 "job $job to stop" job_state_is "$job" FAILED
  cat "$d/out"
  expect_eq "$(job_field "$job" ExitCode)" 3:0 "exit code of the stopped job"
  expect_eq "$(job_field "$job" Restarts)" 2 "Restarts at the cap"
  expect_eq "$(sed -n 's/^resumed from step \([0-9]*\) .*/\1/p' "$d/out" | tr '\n' ' ')" "50 50 " "steps resumed from"
  grep -q '^restart cap: 1 restart(s) in a row found no newer checkpoint than step 50 (--max-restarts 0); stopping without requeue$' \
    "$d/out" || fail "no restart-cap line from baton-train"
  job_field "$job" Comment | grep -q 'restart cap' || fail "the job's comment does not say why: $(job_field "$job" Comment)"
  # By hand: the same job again (a new job id counts its own restarts).
  submit "$d" "$STEPS" -- --max-restarts 0 --ckpt-every 50
  again=$JOB
  wait_for 180 "job $again to complete" job_state_is "$again" COMPLETED
  grep -q '^\[train.sbatch .* job '"$again"' restart 0\] start' "$d/out" || fail "no run of job $again"
  expect_eq "$(sed -n 's/^final_checksum=//p' "$d/out" | sort -u)" "$(reference "$STEPS")" "final checksum after resuming by hand"
}
