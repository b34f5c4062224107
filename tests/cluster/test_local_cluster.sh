# The local Slurm cluster itself (scripts/local-cluster): layout, requeue on
# exit 75, and a node failure with requeue and revival. Sourced by run-all.

test_four_nodes_idle_with_their_own_addresses() {
  local out
  out=$(sinfo -h -N -o '%N %t %o' | sort -u)
  echo "$out"
  expect_eq "$(echo "$out" | awk '{print $1}' | tr '\n' ' ')" "n1 n2 n3 n4 " "node names"
  expect_eq "$(echo "$out" | awk '{print $2}' | sort -u | tr '\n' ' ')" "idle " "node states"
  expect_eq "$(echo "$out" | awk '{print $3}' | sort -u | wc -l)" 4 "distinct node addresses"
}

test_each_node_has_its_host_name_and_scratch_dir() {
  local out
  out=$(srun -N4 -n4 --ntasks-per-node=1 bash -c \
    'echo "$SLURMD_NODENAME $(hostname) $BATON_NODE_SCRATCH"; test -d "$BATON_NODE_SCRATCH"' | sort)
  echo "$out"
  expect_eq "$(echo "$out" | awk '$1 == $2' | wc -l)" 4 "tasks whose hostname is their node"
  expect_eq "$(echo "$out" | awk '$3 ~ ("/scratch/" $1 "$")' | wc -l)" 4 "tasks with their node's scratch directory"
}

test_start_twice_is_harmless() {
  local before after
  before=$("$REPO/scripts/local-cluster" status 2>&1) || fail "status before: $before"
  expect_eq "$(echo "$before" | grep -c 'pid [0-9]')" 6 "daemons with a pid (munged, slurmctld, 4 slurmd)"
  "$REPO/scripts/local-cluster" start >/dev/null || fail "second start failed"
  after=$("$REPO/scripts/local-cluster" status 2>&1) || fail "status after: $after"
  # The same daemons (same pids) still run.
  expect_eq "$(echo "$after" | grep -oE 'pid [0-9]+' | sort)" \
            "$(echo "$before" | grep -oE 'pid [0-9]+' | sort)" "daemon pids"
  srun -N4 -n4 true
}

test_batch_job_exiting_75_is_requeued_and_runs_again() {
  local d job
  d=$(case_dir)
  cat > "$d/job.sh" <<'JOB'
#!/bin/bash
echo "run restart_count=${SLURM_RESTART_COUNT:-0}"
[ "${SLURM_RESTART_COUNT:-0}" -ge 1 ] && exit 0
exit 75
JOB
  job=$(sbatch --parsable --requeue --open-mode=append -N1 -o "$d/out" "$d/job.sh")
  wait_for 150 "job $job to complete after its requeue" job_state_is "$job" COMPLETED
  cat "$d/out"
  expect_eq "$(job_field "$job" Restarts)" 1 "Restarts of job $job"
  expect_eq "$(grep -c '^run ' "$d/out")" 2 "runs of job $job"
  grep -q 'run restart_count=1' "$d/out" || fail "second run did not see SLURM_RESTART_COUNT=1"
}

test_node_failure_requeues_job_and_revive_returns_node() {
  local d job
  d=$(case_dir)
  cat > "$d/job.sh" <<'JOB'
#!/bin/bash
echo "run restart_count=${SLURM_RESTART_COUNT:-0} nodes=$SLURM_JOB_NODELIST"
if [ "${SLURM_RESTART_COUNT:-0}" -eq 0 ]; then
  srun sleep 600
else
  srun hostname
fi
JOB
  job=$(sbatch --parsable --requeue --open-mode=append -N4 -o "$d/out" "$d/job.sh")
  wait_for 60 "job $job to run" job_state_is "$job" RUNNING
  wait_for 30 "the job's step to start" grep -q '^run ' "$d/out"
  "$REPO/scripts/local-cluster" kill-node n4
  node_state_is n4 down || node_state_is n4 'down*' || fail "n4 is not down: $(sinfo -h -N -n n4 -o %t)"
  wait_for 60 "job $job to be requeued" test "$(job_field "$job" Restarts)" = 1
  "$REPO/scripts/local-cluster" revive-node n4
  wait_for 150 "requeued job $job to complete" job_state_is "$job" COMPLETED
  cat "$d/out"
  expect_eq "$(grep -c '^run ' "$d/out")" 2 "runs of job $job"
  expect_eq "$(grep -cE '^n[1-4]$' "$d/out")" 4 "hosts printed by the second run"
  wait_for 30 "n4 to be idle" node_state_is n4 idle
}
