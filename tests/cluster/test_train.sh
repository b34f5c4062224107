# shellcheck shell=bash
# shellcheck disable=SC2016  # single-quoted commands and awk/perl programs run in another shell (srun's, bash -c) or language, which expands them
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

WORK=$BATON_TEST_RESULTS/cluster-train
mkdir -p "$WORK"
chmod 755 "$WORK"

# Long enough to interrupt, short enough to keep the suite in minutes.
STEPS=100
# Periodic checkpoints saved asynchronously (issue 17): every fault below
# meets a save in flight or just committed.
OPTS=(--ckpt-every 10 --hidden 256 --ckpt-mode async --progress 0)  # --progress 0: the step=N lines read here
STEP_MS=60

. "$REPO/tests/cluster/train-lib.sh"

test_node_failure_with_a_spare_node_moves_the_job() {
  begin_case
  local d job node run nodes
  d=$(case_dir)
  reference "$STEPS" >/dev/null
  submit "$d" "$STEPS"
  job=$JOB
  wait_step "$d/out" 25
  node=$(rank_node "$job" 1)
  before_fault "$job" "$d" 1
  kill_node "$node"
  after_fault "$job" "$d" 1
  run=$(($(runs "$d/out") + 1))
  wait_for 60 "the requeued run to start" runs_at_least "$d/out" "$run"
  revive_node "$node"
  check_job "$job" "$d" 1 "$STEPS"
  # The run after the failure started while the node was down: it ran elsewhere.
  nodes=$(run_out "$d/out" "$run" | sed -n 's/.*start on \([^ ]*\) at .*/\1/p')
  echo "killed $node; the next run ran on $nodes"
  [ "$(scontrol show hostnames "$nodes" | grep -cx "$node")" = 0 ] || fail "the job ran on $node again"
}

test_node_failure_without_a_spare_node_waits_for_revive() {
  begin_case
  local d job node runs
  d=$(case_dir)
  reference "$STEPS" 4 >/dev/null
  submit "$d" "$STEPS" -N4
  job=$JOB
  wait_step "$d/out" 25
  node=$(rank_node "$job" 2)
  before_fault "$job" "$d" 1
  kill_node "$node"
  after_fault "$job" "$d" 1
  runs=$(runs "$d/out")
  # Three nodes left for a job of four: it waits, and no run starts.
  wait_for 60 "job $job to wait for nodes" job_reason_mentions "$job" 'Resources|ReqNodeNotAvail|DOWN'
  expect_eq "$(runs "$d/out")" "$runs" "runs while a node of four is down"
  expect_eq "$(job_field "$job" JobState)" PENDING "state while a node of four is down"
  revive_node "$node"
  check_job "$job" "$d" 1 "$STEPS" 4
}
job_reason_mentions() { [[ $(job_field "$1" Reason) =~ $2 ]]; }

test_scontrol_requeue_stops_at_an_agreed_step_and_resumes() {
  begin_case
  local d job
  d=$(case_dir)
  reference "$STEPS" >/dev/null
  submit "$d" "$STEPS"
  job=$JOB
  wait_step "$d/out" 25
  before_fault "$job" "$d" 1
  scontrol requeue "$job"
  after_fault "$job" "$d" 1
  check_job "$job" "$d" 1 "$STEPS"
  # KillWait (2 s here) bounds the save: a stop that made it lost nothing.
  if run_out "$d/out" "$(cut -d' ' -f2 "$d/fault.1")" | grep '^stop agreed' >/dev/null; then
    check_stop_lost_nothing "$d" 1
  fi
}

test_preemption_by_a_high_priority_job_stops_saves_and_resumes() {
  begin_case
  local d job high steps=250
  d=$(case_dir)
  reference "$steps" >/dev/null
  submit "$d" "$steps" -- --step-ms 100
  job=$JOB
  wait_step "$d/out" 15
  before_fault "$job" "$d" 1
  high=$(sbatch --parsable -p high -N4 -o "$d/high.out" --wrap 'echo high ran on $(hostname)')
  CASE_JOBS="$CASE_JOBS $high"
  after_fault "$job" "$d" 1
  wait_for 120 "high-priority job $high to complete" job_state_is "$high" COMPLETED
  grep -q '^high ran on n' "$d/high.out" || fail "the high-priority job did not run"
  check_job "$job" "$d" 1 "$steps"
  # SIGTERM reached the ranks; they agreed on a step and saved it within GraceTime.
  check_stop_lost_nothing "$d" 1
}

test_time_limit_signal_stops_saves_and_requeues() {
  begin_case
  local d job steps=250 k=0 r run stop
  d=$(case_dir)
  reference "$steps" >/dev/null
  # USR2 50 s before a 1-minute limit: 2-25 s into each run here (slurmctld
  # checks limits periodically). Every run that gets it stops at an agreed
  # step; 40 s of work take two or three runs.
  submit "$d" "$steps" --time=1 --signal=B:USR2@50 -- --step-ms 150
  job=$JOB
  wait_for 60 "the first agreed stop" grep -q '^stop agreed at step' "$d/out"
  # The run stops and is requeued within a second: the fault's run and
  # restart come from the output, not from a Restarts read too late.
  echo "0 1" >"$d/fault.1"
  after_fault "$job" "$d" 1
  wait_for 240 "job $job to complete" job_state_is "$job" COMPLETED
  # Every run that stopped at an agreed step is a fault (a USR2 that comes as
  # a run finishes stops nothing); the first was recorded with ls, the later
  # ones by the step they stopped at (saved before "stop agreed" is printed).
  for run in $(seq 1 "$(runs "$d/out")"); do
    stop=$(run_out "$d/out" "$run" | sed -n 's/^stop agreed at step \([0-9]*\):.*/\1/p')
    [ -n "$stop" ] || continue
    k=$((k + 1))
    run_out "$d/out" "$run" | grep 'USR2 (time limit near)' >/dev/null || fail "run $run stopped without the signal"
    [ "$k" = 1 ] && continue
    r=$(run_out "$d/out" "$run" | sed -n 's/^\[train.sbatch .* restart \([0-9]*\)\] start on .*/\1/p')
    echo "$r $run $stop" >"$d/fault.$k"
  done
  check_job "$job" "$d" "$k" "$steps"
  for run in $(seq 1 "$k"); do check_stop_lost_nothing "$d" "$run"; done
  ! grep -q 'DUE TO TIME LIMIT' "$d/out" || fail "a run reached its time limit instead of stopping first"
}

test_sigkill_of_a_rank_ends_the_step_and_the_job_resumes() {
  begin_case
  local d job
  d=$(case_dir)
  reference "$STEPS" >/dev/null
  submit "$d" "$STEPS"
  job=$JOB
  wait_step "$d/out" 25
  before_fault "$job" "$d" 1
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
  wait_step "$d/out" 25
  pid=$(rank_pid "$job" 1)
  before_fault "$job" "$d" 1
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
  wait_step "$d/out" 15
  # An asynchronous save is committed at the next save (step 10's at step
  # 20): a kill at step 15 could find nothing committed. Wait for the event.
  wait_for 120 "the first committed version" has_committed "$d"
  before_fault "$job" "$d" 1
  kill -9 "$(rank_pid "$job" 2)"
  after_fault "$job" "$d" 1
  # The requeued run first: the killed run may itself have printed the step
  # waited for below (with asynchronous saves the newest committed version
  # lags the step by up to two intervals), and its ranks are gone.
  wait_for 120 "the requeued run to start" runs_at_least "$d/out" 2
  wait_step "$d/out" $(($(cut -d' ' -f3 "$d/fault.1") + 15))
  node=$(rank_node "$job" 1)
  before_fault "$job" "$d" 2
  kill_node "$node"
  after_fault "$job" "$d" 2
  wait_for 60 "the next run to start" runs_at_least "$d/out" $(($(runs "$d/out") + 1))
  revive_node "$node"
  check_job "$job" "$d" 2 "$STEPS"
}

# --max-restarts 0: a restart that finds no newer checkpoint than the one
# before did stops the job. Run 1 saves step 50 and is killed; the next run
# resumes step 50 (progress: run 1 had saved) and is killed before step 100;
# the one after finds step 50 again: it stops with exit 3, the job is not
# requeued, and its comment says why. (A launch crash is such a restart too:
# then the cap comes one kill earlier.) Submitting the job again resumes it
# to the end.
test_restart_cap_stops_the_job_and_says_why() {
  begin_case
  local d job again faults=1 crashes comment
  d=$(case_dir)
  reference "$STEPS" >/dev/null
  # Synchronous saves here: the checkpoint line then means committed (an
  # asynchronous one is committed only at the next save).
  submit "$d" "$STEPS" -- --max-restarts 0 --ckpt-every 50 --ckpt-mode sync
  job=$JOB
  wait_for 120 "the first checkpoint" grep -q '^checkpoint step=50 ' "$d/out"
  before_fault "$job" "$d" 1
  kill -9 "$(rank_pid "$job" 1)"
  after_fault "$job" "$d" 1
  wait_for 120 "a run to resume and pass step 50, or the job to stop" resumed_past_50_or_failed "$job" "$d/out"
  if ! job_state_is "$job" FAILED; then
    faults=2
    before_fault "$job" "$d" 2
    kill -9 "$(rank_pid "$job" 1)"
    after_fault "$job" "$d" 2
  fi
  wait_for 120 "job $job to stop" job_state_is "$job" FAILED
  cat "$d/out"
  crashes=$(launch_crashes "$d/out")
  expect_eq "$(job_field "$job" ExitCode)" 3:0 "exit code of the stopped job"
  expect_eq "$(job_field "$job" Restarts)" "$((faults + crashes))" "Restarts at the cap ($faults kills, $crashes launch crashes)"
  check_resumes "$d" "$faults"
  grep -q '^restart cap: 1 restart(s) in a row found no newer checkpoint than step 50 (--max-restarts 0); stopping without requeue$' \
    "$d/out" || fail "no restart-cap line from baton-train"
  comment=$(squeue -h -t all -j "$job" -o %k)
  echo "comment of job $job: $comment"
  [[ $comment == "baton-train restart cap: 1 restart(s) in a row found no newer checkpoint than step 50"*"resume by hand: sbatch again"* ]] ||
    fail "the job's comment does not say why"
  # By hand: the same job again (a new job id counts its own restarts).
  submit "$d" "$STEPS" -- --max-restarts 0 --ckpt-every 50 --ckpt-mode sync
  again=$JOB
  wait_for 180 "job $again to complete" job_state_is "$again" COMPLETED
  tail -n 5 "$d/out"
  grep -q "^\[train.sbatch .* job $again restart 0\] start" "$d/out" || fail "no run of job $again"
  expect_eq "$(sed -n 's/^final_checksum=//p' "$d/out" | sort -u)" "$(reference "$STEPS")" "final checksum after resuming by hand"
}
resumed_past_50_or_failed() {
  job_state_is "$1" FAILED && return 0
  run_out "$2" "$(runs "$2")" | grep '^resumed from step 50 ' >/dev/null && reached "$2" 51
}
