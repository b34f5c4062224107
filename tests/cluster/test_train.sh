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

# A job without spares and without a minimum (baton run's defaults: the
# step needs every node of the job, --max-restarts 3): after a node failure
# too few nodes can run the step, and baton run falls back to the requeue;
# the next run lands on the free node.
test_node_failure_with_a_spare_node_moves_the_job() {
  begin_case
  local d job node run nodes STEP_RESTARTS=3
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
  grep -q '^\[baton run .*\] fewer than 3 node(s) of the allocation can run a step, or Slurm did not answer (.*): exiting 75 to be requeued$' "$d/out" ||
    fail "the job did not fall back to the requeue for want of nodes"
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

# With relaunches to spare (STEP_RESTARTS=3): baton run exits 75 once and
# launches nothing into the allocation Slurm is taking away (the old loop
# did when the step ended before its trap ran: 12 s of a launch that held up
# the preempting job).
test_preemption_by_a_high_priority_job_stops_saves_and_resumes() {
  begin_case
  local d job high steps=250 run STEP_RESTARTS=3
  d=$(case_dir)
  reference "$steps" >/dev/null
  submit "$d" "$steps" -- --step-ms 100
  job=$JOB
  wait_step "$d/out" 15
  before_fault "$job" "$d" 1
  run=$(runs "$d/out")
  high=$(sbatch --parsable -p high -N4 -o "$d/high.out" --wrap 'echo high ran on $(hostname)')
  CASE_JOBS="$CASE_JOBS $high"
  after_fault "$job" "$d" 1
  run_out "$d/out" "$run" | grep "^\[$SCRIPT_NAME " || true
  expect_eq "$(run_out "$d/out" "$run" | grep -c "^\[$SCRIPT_NAME .*\] step launch ")" 1 "launches of the preempted run"
  run_out "$d/out" "$run" | grep -q "^\[$SCRIPT_NAME .*\] step ended with 75 after a stop was asked for (.*): exiting 75 to be requeued" ||
    fail "baton run did not end the preempted run with 75 once, naming the stop"
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
  # USR2 50 s before a 1-minute limit: 10-40 s into each run (slurmctld
  # checks limits every 30 s, its PERIODIC_TIMEOUT; 23-25 s measured here).
  # Every run that gets it stops at an agreed step; 40 s of work take two or
  # three runs. The wait for the stop counts from the run's start: a job
  # submitted as the previous case's jobs end may start only after their
  # epilogs, and a 60 s wait from the submission once missed a signal
  # that came 40 s into the run.
  submit "$d" "$steps" --time=1 --signal=B:USR2@50 -- --step-ms 150
  job=$JOB
  wait_for 60 "job $job's first run to start" grep -qs '^\[baton run .* restart 0\] start on' "$d/out"
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
    r=$(run_out "$d/out" "$run" | sed -n 's/^\[baton run .* restart \([0-9]*\)\] start on .*/\1/p')
    echo "$r $run $stop" >"$d/fault.$k"
  done
  check_job "$job" "$d" "$k" "$steps"
  for run in $(seq 1 "$k"); do check_stop_lost_nothing "$d" "$run"; done
  ! grep -q 'DUE TO TIME LIMIT' "$d/out" || fail "a run reached its time limit instead of stopping first"
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

# Inside the allocation (examples/train.sbatch with STEP_RESTARTS): one job
# of 4 nodes for a step of 3 (one spare), node-local checkpoints (level 2).
# Fault 1 kills a node of the step: the step runs again at once on the
# spare, the lost node's shards read from their partner copies (level 2),
# no requeue. Fault 2 kills a rank (two failures in a row): with every
# node healthy the step runs again on the same nodes. Fault 3 (a rank
# again) would need a third launch, past --max-restarts 2: the job
# falls back to a requeue
# (exit 75); with a node of four down it waits until the node comes back,
# then runs on all four nodes again and completes. Every resume is checked
# against `baton ckpt ls --json`, the level read, and the final checksum.
test_in_allocation_spare_then_two_in_a_row_then_the_cap_and_a_node_that_comes_back() {
  begin_case
  local d job node l k STEP_RESTARTS=2 STEP_NODES=3 LOCAL_DIR steps=$((2 * STEPS))
  # Twice the steps: three faults come one after another, each once the
  # launch before it has run 25 steps; with STEPS the job could end (at
  # ~80 ms a step) before the test, slowed by a loaded machine, gets to the
  # third.
  d=$(case_dir)
  reference "$steps" >/dev/null
  LOCAL_DIR=$BATON_CLUSTER_DIR/local/scratch/train-$(basename "$d")
  submit "$d" "$steps" -N4
  job=$JOB
  wait_for 120 "the first committed version" has_committed "$d"
  wait_step "$d/out" 25
  node=$(rank_node "$job" 1)
  inalloc_fault "$job" "$d" 1 kill_node "$node"
  l=$(launches "$d/out")
  [ "$(scontrol show hostnames "$(launch_nodes "$d/out" "$l")" | grep -cx "$node")" = 0 ] || fail "the step ran on the dead $node again"
  expect_eq "$(scontrol show hostnames "$(launch_nodes "$d/out" "$l")" | wc -l)" 3 "nodes of the step on the spare"
  # Fault 2 right after: a rank (the second failure in a row). Each launch
  # first runs 25 steps: its asynchronous save of resumed + 10 is committed
  # at resumed + 20, so the requeue below restores a version saved on
  # n[1,3-4] (with 15, no launch had committed one when the test polled at
  # once: the requeued run restored launch 0's version, which level 2
  # could serve: "got '2', expected '3'", 2 runs of 2 here).
  wait_for 60 "launch $l to pass 25 steps" launch_reached "$d/out" "$l" \
    $(($(launch_out "$d/out" "$l" | sed -n 's/^resumed from step \([0-9]*\) .*/\1/p') + 25))
  inalloc_fault "$job" "$d" 2 kill -9 "$(rank_pid "$job" 2)"
  l=$(launches "$d/out")
  # The next failure is past the cap: a requeue.
  wait_for 60 "launch $l to pass 25 steps" launch_reached "$d/out" "$l" \
    $(($(launch_out "$d/out" "$l" | sed -n 's/^resumed from step \([0-9]*\) .*/\1/p') + 25))
  before_fault "$job" "$d" 1
  kill -9 "$(rank_pid "$job" 1)"
  after_fault "$job" "$d" 1
  grep -q '(--max-restarts 2): exiting 75 to be requeued at time=' "$d/out" || fail "no fall-back to the requeue at the cap"
  wait_for 60 "job $job to wait for the node" job_reason_mentions "$job" 'Resources|ReqNodeNotAvail|DOWN'
  revive_node "$node"
  check_job "$job" "$d" 1 "$steps"
  # Level 2 serves the requeued run only where its ranks sit on the nodes of
  # the launch that saved the version it restores (a wiped node's shard comes
  # from its partner); on other nodes the restore reads the shared directory.
  # Which launch saved it depends on how far each launch got before its fault
  # (a version every 20 steps): launch 0 (on n[1-3]) when the two faulted
  # launches both ended before step 40, and the requeued run is on n[1-3] again.
  local restored saver want_level
  restored=$(run_out "$d/out" "$(runs "$d/out")" | sed -n 's/.*restored step \([0-9]*\) from level.*/\1/p' | head -n 1)
  saver=$(saving_launch "$d/out" "$restored")
  want_level=3
  [ "$(launch_nodes "$d/out" "$saver")" != "$(launch_nodes "$d/out" "$(launches "$d/out")")" ] || want_level=2
  echo "the requeued run restored step $restored, saved by launch $saver on $(launch_nodes "$d/out" "$saver"); it runs on $(launch_nodes "$d/out" "$(launches "$d/out")"): level $want_level"
  expect_eq "$(run_out "$d/out" "$(runs "$d/out")" | sed -n 's/.*restored step [0-9]* from level \([0-9]\).*/\1/p' | head -n 1)" "$want_level" \
    "level the requeued run's restore read"
  for k in 1 2; do
    [ -f "$d/inalloc.$k" ] && echo "in-allocation fault $k: $(awk '{ printf "%.2f", $2 - $1 }' "$d/inalloc.$k") s from the fault to the first resumed step"
  done
  # The step of the rank killed at the cap ends with its 137, or with a peer's 141: when srun ends
  # the step, a rank still writing to its output (now closed) can die of SIGPIPE before slurmstepd's
  # SIGKILL reaches it (seen once in 12 runs, 2026-12-06); either is a relaunch cause.
  check_launch_records "$job" "$d" "start" "node failure: $node (" "~^step ended with 1(37|41)([^0-9]|$)" "requeue (restart 1)"
}

# check_launch_records JOB DIR CAUSE...: baton run recorded every launch in
# the job's event log (docs/events.md, step_launch), the K-th with a cause
# that starts with the K-th CAUSE (or matches it: a CAUSE written "~ERE"), and
# a step_end after every launch.
check_launch_records() {
  local job=$1 d=$2 batch k=0 want got
  shift 2
  batch=$(ckpt_dir "$d")/events/$job-batch.jsonl
  cat "$batch"
  expect_eq "$(grep -c '"ev":"step_launch"' "$batch")" "$#" "step_launch records of job $job"
  expect_eq "$(grep -c '"ev":"step_end"' "$batch")" "$#" "step_end records of job $job"
  for want in "$@"; do
    k=$((k + 1))
    got=$(grep '"ev":"step_launch"' "$batch" | sed -n "${k}p" | perl -MJSON::PP -ne 'print decode_json($_)->{cause}')
    if [[ $want == "~"* ]]; then  # "~ERE": the cause matches the extended regular expression
      [[ $got =~ ${want#"~"} ]] || fail "launch $k's recorded cause is '$got', not /${want#"~"}/"
    else
      [[ $got == "$want"* ]] || fail "launch $k's recorded cause is '$got', not '$want...'"
    fi
  done
}

# Continue on fewer nodes: a job of 3 nodes, no spare, --min-nodes 2.
# A node dies while a save is in flight (asynchronous saves: the kill comes
# one step after a save began; the version being written has no manifest
# and is ignored): the step goes on on the 2 nodes left, at world size 2,
# without a requeue, from the newest version committed before (a restore at
# another world size reads the shared directory, level 3), and ends with
# the uninterrupted 3-rank run's checksum (baton-train's weights do not
# depend on the world size).
test_in_allocation_shrink_3_to_2_after_a_failure_during_a_save() {
  begin_case
  local d job node l s STEP_RESTARTS=3 STEP_NODES=3 MIN_NODES=2 LOCAL_DIR WANT_LEVEL=3
  d=$(case_dir)
  reference "$STEPS" >/dev/null
  LOCAL_DIR=$BATON_CLUSTER_DIR/local/scratch/train-$(basename "$d")
  submit "$d" "$STEPS"
  job=$JOB
  wait_for 120 "the first committed version" has_committed "$d"
  wait_step "$d/out" 25
  # One step into the next save's write.
  s=$(run_out "$d/out" "$(runs "$d/out")" | last_step)
  wait_step "$d/out" $(((s / 10 + 1) * 10 + 1))
  node=$(rank_node "$job" 1)
  inalloc_fault "$job" "$d" 1 kill_node "$node"
  l=$(launches "$d/out")
  expect_eq "$(scontrol show hostnames "$(launch_nodes "$d/out" "$l")" | wc -l)" 2 "nodes of the step after the shrink"
  wait_for 180 "job $job to complete" job_state_is "$job" COMPLETED
  revive_node "$node"
  expect_eq "$(job_field "$job" Restarts)" 0 "Restarts of job $job (the shrink is no requeue)"
  expect_eq "$(launch_out "$d/out" "$l" | grep -c '^final_checksum=')" 2 "checksum lines of the 2-rank launch"
  expect_eq "$(sed -n 's/^final_checksum=//p' "$d/out" | sort -u)" "$(reference "$STEPS")" "final checksum at world size 2 against the 3-rank run"
  echo "in-allocation shrink: $(awk '{ printf "%.2f", $2 - $1 }' "$d/inalloc.1") s from the fault to the first resumed step"
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
  # baton run's verdict, then the program's last line on stderr (baton-train's own why).
  [[ $comment == "baton run: step ended with 3, the program's own status"*"not requeued; last words: baton-train: restart cap: 1 restart(s) in a row found no newer checkpoint than step 50"*"resume by hand"* ]] ||
    fail "the job's comment does not say why"
  # By hand: the same job again (a new job id counts its own restarts).
  submit "$d" "$STEPS" -- --max-restarts 0 --ckpt-every 50 --ckpt-mode sync
  again=$JOB
  wait_for 180 "job $again to complete" job_state_is "$again" COMPLETED
  tail -n 5 "$d/out"
  grep -q "^\[baton run .* job $again restart 0\] start" "$d/out" || fail "no run of job $again"
  expect_eq "$(sed -n 's/^final_checksum=//p' "$d/out" | sort -u)" "$(reference "$STEPS")" "final checksum after resuming by hand"
}
resumed_past_50_or_failed() {
  job_state_is "$1" FAILED && return 0
  run_out "$2" "$(runs "$2")" | grep '^resumed from step 50 ' >/dev/null && reached "$2" 51
}
