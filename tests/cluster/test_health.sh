# shellcheck shell=bash
# Deadlines and requeue against Slurm (tests/mpi/health_prog.cc): a batch
# job whose rank times out exits 75 and Slurm runs it again; Requeue() from
# inside a job requeues it. Sourced by run-all (run_cases).

PROG=${BATON_BUILD_DIR:?}/tests/mpi/baton_health_prog

test_batch_job_whose_rank_times_out_exits_75_and_runs_again() {
  local d job
  d=$(case_dir)
  cat > "$d/job.sh" <<JOB
#!/bin/bash
echo "run restart_count=\${SLURM_RESTART_COUNT:-0}"
export BATON_COLLECTIVE_TIMEOUT=3
srun --mpi=pmix "$PROG" timeout
rc=\$?
echo "srun exit \$rc"
exit \$rc
JOB
  job=$(sbatch --parsable --requeue --open-mode=append -N2 -n3 -o "$d/out" "$d/job.sh")
  wait_for 180 "job $job to complete after its requeue" job_state_is "$job" COMPLETED
  cat "$d/out"
  expect_eq "$(job_field "$job" Restarts)" 1 "Restarts of job $job"
  expect_eq "$(grep -c '^run ' "$d/out")" 2 "runs of job $job"
  grep -q 'at step 3 timed out after 3 s; ranks not answering heartbeats: none; exiting with 75' "$d/out" ||
    fail "the first run logged no timeout naming the step and the deadline"
  # The ranks ask Slurm to requeue the job as they exit 75 (the batch script
  # is ended by the requeue before srun can report), and their tasks exit 75.
  grep -q "asked Slurm to requeue job $job (a rank timed out)" "$d/out" || fail "no rank asked Slurm to requeue"
  grep -Eq '^srun: error: .*Exited with exit code 75$|^srun exit 75$' "$d/out" || fail "no task of the first run exited 75"
  expect_eq "$(grep -c 'second run ok, sum 3' "$d/out")" 3 "ranks of the second run that all-reduced"
  ! grep -q '^unexpected' "$d/out" || fail "a call returned instead of exiting 75"
}

test_requeue_from_inside_a_job_requeues_it() {
  local d job
  d=$(case_dir)
  cat > "$d/job.sh" <<JOB
#!/bin/bash
echo "run restart_count=\${SLURM_RESTART_COUNT:-0}"
srun --mpi=pmix "$PROG" requeue
echo "srun exit \$?"
JOB
  job=$(sbatch --parsable --requeue --open-mode=append -N2 -n2 -o "$d/out" "$d/job.sh")
  wait_for 180 "job $job to complete after its requeue" job_state_is "$job" COMPLETED
  cat "$d/out"
  expect_eq "$(job_field "$job" Restarts)" 1 "Restarts of job $job"
  grep -q "^requeue first call: OK: asked Slurm to requeue job $job at step -1 by rank 0$" "$d/out" ||
    fail "the first Requeue() did not say it asked Slurm"
  grep -q "^requeue second call: OK: requeue already asked (.*); not asked again$" "$d/out" ||
    fail "the second Requeue() did not say it was already asked"
  expect_eq "$(grep -c 'second run restart_count=1' "$d/out")" 2 "ranks of the second run"
}

test_requeue_of_a_job_that_may_not_be_requeued_says_why() {
  local d job
  d=$(case_dir)
  cat > "$d/job.sh" <<JOB
#!/bin/bash
srun --mpi=pmix -n1 "$PROG" requeue
JOB
  job=$(sbatch --parsable --no-requeue -N1 -n1 -o "$d/out" "$d/job.sh")
  wait_for 120 "job $job to end" job_state_is "$job" FAILED
  cat "$d/out"
  grep -q "^requeue first call: baton\[runtime\] Unavailable .*slurm_requeue of job $job failed: " "$d/out" ||
    fail "Requeue() of a --no-requeue job did not return Slurm's reason"
  expect_eq "$(job_field "$job" Restarts)" 0 "Restarts of job $job"
}

# Issue 14, item 8: a rank stuck for good (SIGSTOP) while the others time
# out and exit 75. Measured before the fix, with and without srun -K: the
# stopped task was SIGKILLed (Slurm's pmix plugin ends the step once tasks
# leave without MPI_Finalize), srun and the batch script said 137, the job
# ended FAILED, ExitCode 137, and was not requeued. Now every rank that
# exits 75 inside a job also asks Slurm to requeue it (ExitForRequeue), so
# the job runs again whatever srun reports (docs/recovery.md says what the
# step and the batch script get, with and without -K).
stuck_rank_job() {  # stuck_rank_job SRUN_OPTION
  local d job
  d=$(case_dir)
  cat > "$d/job.sh" <<JOB
#!/bin/bash
echo "run restart_count=\${SLURM_RESTART_COUNT:-0}"
export BATON_COLLECTIVE_TIMEOUT=3
srun $1 --mpi=pmix "$PROG" stuck
echo "srun exit \$?"
JOB
  job=$(sbatch --parsable --requeue --open-mode=append -t 3 -N2 -n3 -o "$d/out" "$d/job.sh")
  wait_for 180 "job $job to complete after its requeue" job_state_is "$job" COMPLETED
  cat "$d/out"
  # Exactly one requeue. The requeued run's step used to fail on the stuck rank's node
  # ("task 2 launch failed: Unspecified error") when that node's old slurmstepd was still in
  # the pmix plugin's fini, holding the step's PMIx socket, after slurmd had reported the job
  # complete; the cluster's Epilog now holds the node until it has exited (docs/testing.md).
  local restarts
  restarts=$(job_field "$job" Restarts)
  expect_eq "$restarts" 1 "Restarts of job $job"
  expect_eq "$(grep -c '^run ' "$d/out")" 2 "runs of job $job"
  grep -q "asked Slurm to requeue job $job (a rank timed out)" "$d/out" || fail "no rank asked Slurm to requeue"
  # What the first run's srun and batch script get: docs/recovery.md. The requeued run's
  # step ends well.
  [ "$(grep '^srun exit' "$d/out" | tail -n 1)" = "srun exit 0" ] || fail "the requeued run's srun did not exit 0"
  expect_eq "$(grep -c "run $restarts ok, sum 3" "$d/out")" 3 "ranks of the last run that all-reduced"
}

test_a_stuck_rank_requeues_the_job_with_srun_K() {
  stuck_rank_job -K
}

test_a_stuck_rank_requeues_the_job_without_srun_K() {
  stuck_rank_job --kill-on-bad-exit=0
}

# The same stuck rank in a job that may not be requeued (slurm_requeue is refused): under
# srun -K, srun ends the step once the other tasks exit 75, SIGKILLs the stopped task and
# exits 137; the job ends FAILED with ExitCode 137 (RequeueExit=75 does not fire). Without
# -K srun waits for the stopped task until the time limit (measured, docs/recovery.md; not
# a test: it takes the time limit).
test_a_stuck_rank_in_a_job_that_may_not_be_requeued_ends_with_137_under_srun_K() {
  local d job
  d=$(case_dir)
  cat > "$d/job.sh" <<JOB
#!/bin/bash
export BATON_COLLECTIVE_TIMEOUT=3
srun -K --mpi=pmix "$PROG" stuck
rc=\$?
echo "srun exit \$rc"
exit \$rc
JOB
  job=$(sbatch --parsable --no-requeue -t 3 -N2 -n3 -o "$d/out" "$d/job.sh")
  wait_for 120 "job $job to fail" job_state_is "$job" FAILED
  cat "$d/out"
  grep -q "requeue: slurm_requeue of job $job failed: " "$d/out" || fail "no rank was refused the requeue"
  grep -Eq '^srun: error: .*tasks? [0-9-]+: Exited with exit code 75$' "$d/out" || fail "no task exited 75"
  grep -Eq '^srun: error: .*task 2: Killed$' "$d/out" || fail "srun did not report the stuck task killed"
  grep -qx 'srun exit 137' "$d/out" || fail "srun did not exit 137"
  expect_eq "$(job_field "$job" ExitCode)" 137:0 "ExitCode of job $job"
  expect_eq "$(job_field "$job" Restarts)" 0 "Restarts of job $job"
}
