# shellcheck shell=bash
# shellcheck disable=SC2016  # single-quoted job scripts run in the job's shell
# The node-local directory's lifecycle on the local cluster (plugstack.conf
# local_root=...; base/launch/local_dir.h, local_sweep.h): each job of an
# ordinary user gets <root>/<uid>/<jobid> on every node it runs on, the
# same path on every run; the job epilog of any job removes the
# directories of jobs that have ended for good, on every node they touched.
# One test per way a job ends: completed, failed, cancelled, requeued away,
# on a node that died and came back. Each node's disk is DIR/disk/nK on the
# host (DIR/local on the node). Sourced by run-all.

LOCAL_ROOT="$BATON_CLUSTER_DIR/local/baton"
USER_NAME=baton-test

ensure_user() { id "$USER_NAME" >/dev/null 2>&1 || useradd --system --no-create-home --shell /bin/bash "$USER_NAME"; }
user_uid() { id -u "$USER_NAME"; }
# The job's directory on NODE's disk, as the host sees it.
dir_on() { echo "$BATON_CLUSTER_DIR/disk/$1/baton/$(user_uid)/$2"; }

# with_local_root COMMAND...: runs COMMAND (a subshell) with local_root set in plugstack.conf
# (with_plugstack_args); no job of the case outlives it.
with_local_root() { with_plugstack_args "local_root=$LOCAL_ROOT" with_no_job_left "$@"; }
with_no_job_left() {
  local rc=0
  ("$@") || rc=$?
  # A failed case leaves its job waiting for go.N: none may outlive the case.
  scancel -u "$USER_NAME" 2>/dev/null || true
  wait_for 60 "the jobs of $USER_NAME to end" no_jobs_of "$USER_NAME"
  return $rc
}

no_jobs_of() { [ -z "$(squeue -h -u "$1" -o %i)" ]; }

# The job script: each run (SLURM_RESTART_COUNT) records its directory and node, writes a
# file into the directory, says it is ready, waits for go.<run>, then exits with $EXIT.
JOB_SCRIPT='#!/bin/bash
r=${SLURM_RESTART_COUNT:-0}
echo "$BATON_LOCAL_DIR" >"$CASE/dir.$r"
hostname >"$CASE/host.$r"
srun -N "$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 bash -c "touch \"\$BATON_LOCAL_DIR/shard.$r.\$SLURM_NODEID\" && echo \"\$BATON_LOCAL_DIR\" >\"$CASE/step-dir.$r.\$SLURM_NODEID\"" || exit 9
touch "$CASE/ready.$r"
while [ ! -e "$CASE/go.$r" ]; do sleep 0.5; done
exit "${EXIT:-0}"'

# submit CASE SBATCH_ARGS...: submits the job script as the ordinary user; prints the job id.
submit() {
  local case=$1
  shift
  printf '%s\n' "$JOB_SCRIPT" >"$case/job.sh"
  runuser -u "$USER_NAME" -- env SLURM_CONF="$SLURM_CONF" CASE="$case" EXIT="${EXIT:-0}" \
    sbatch --parsable --baton --output="$case/out.%j" "$@" "$case/job.sh"
}

new_case() {
  local d
  d=$(case_dir)
  chmod 777 "$d"
  echo "$d"
}

# ready CASE RUN: the run is in its waiting loop.
ready() { [ -e "$1/ready.$2" ]; }
gone() { [ ! -e "$1" ]; }
# job_ended JOB: the job is over and its epilogs have run (no longer COMPLETING), or the
# controller has already forgotten it (MinJobAge).
job_ended() {
  local line
  line=$(scontrol -o show job "$1" 2>/dev/null) || return 0
  [[ $line =~ JobState=(COMPLETED|FAILED|CANCELLED) ]] && ! [[ $line =~ COMPLETING ]]
}

# check_private DIR: the job's directory is the user's, 0700, under root-owned 0755 parents.
check_private() {
  expect_eq "$(stat -c '%U %a' "$1")" "$USER_NAME 700" "owner and mode of $1"
  expect_eq "$(stat -c '%U %a' "$(dirname "$1")")" "root 755" "owner and mode of $(dirname "$1")"
  expect_eq "$(stat -c '%U %a' "$(dirname "$(dirname "$1")")")" "root 755" "owner and mode of the local root"
}

# sweep_on NODE: ends a job on NODE, whose epilog sweeps NODE's local root.
sweep_on() {
  local id
  id=$(srun -w "$1" -N1 -n1 printenv SLURM_JOB_ID)
  wait_for "$EPILOG_WAIT" "the epilog of job $id, which sweeps $1" job_ended "$id"
}
# How long an epilog may take here: the local cluster's Epilog holds a node
# until the job's last step is gone, some 28 s for a step that lingers
# (docs/testing.md), and more on a loaded 2-core machine (a fresh-clone
# check timed out at 30 s waiting for n1 after a requeuehold). The waits
# end as soon as the event comes.
EPILOG_WAIT=120
node_idle() { [[ $(sinfo -h -N -n "$1" -o %t | head -n 1) =~ ^(idle|mix)$ ]]; }

# A job ends on two nodes as END ("go" with EXIT, or scancel): its directory was on both, the
# same path in the batch script and in the steps, private, and is gone from both afterwards.
ends_and_is_swept() {
  local how=$1 case job n1 n2 path
  ensure_user
  case=$(new_case)
  job=$(EXIT=$([ "$how" = failed ] && echo 3 || echo 0) submit "$case" -N2 -w n1,n2)
  wait_for 60 "job $job to run its step" ready "$case" 0
  path=$(cat "$case/dir.0")
  expect_eq "$path" "$LOCAL_ROOT/$(user_uid)/$job" "BATON_LOCAL_DIR of the batch script"
  expect_eq "$(cat "$case/step-dir.0.0")" "$path" "BATON_LOCAL_DIR of the step on node 0"
  expect_eq "$(cat "$case/step-dir.0.1")" "$path" "BATON_LOCAL_DIR of the step on node 1"
  n1=$(dir_on n1 "$job")
  n2=$(dir_on n2 "$job")
  [ -e "$n1/shard.0.0" ] || fail "no shard in $n1"
  [ -e "$n2/shard.0.1" ] || fail "no shard in $n2 (each node's own disk)"
  check_private "$n1"
  check_private "$n2"
  case $how in
    cancelled) scancel "$job" ;;
    *) touch "$case/go.0" ;;
  esac
  wait_for 60 "job $job to end" job_ended "$job"
  expect_eq "$(job_field "$job" JobState)" "$(tr '[:lower:]' '[:upper:]' <<<"$how")" "job $job's state"
  wait_for "$EPILOG_WAIT" "the directory on n1 to go" gone "$n1"
  wait_for "$EPILOG_WAIT" "the directory on n2 to go" gone "$n2"
}

test_a_completed_jobs_directories_go_from_every_node() { with_local_root ends_and_is_swept completed; }
test_a_failed_jobs_directories_go_from_every_node() { with_local_root ends_and_is_swept failed; }
test_a_cancelled_jobs_directories_go_from_every_node() { with_local_root ends_and_is_swept cancelled; }

# Issue 30 item 8: what a job's end costs the controller. Its epilog on
# each node removes the job's own empty directory without a question, and
# asks about that job alone (slurm_load_job: REQUEST_JOB_INFO_SINGLE) where
# the directory holds data; no node asks for all of the user's jobs
# (REQUEST_JOB_USER_INFO). Before: one REQUEST_JOB_USER_INFO per node, the
# four at the same moment. Nothing else here asks for a job while counting
# (the waits look at the disks), and the case runs before those that kill a
# node: a revived node runs the epilog of a job that ended while it was
# down, whose sweep would ask about this case's running job.
sweep_cost() {
  local case out job n
  ensure_user
  case=$(new_case)
  for what in empty data; do
    for n in n1 n2 n3 n4; do wait_for "$EPILOG_WAIT" "$n to be idle" node_idle "$n"; done
    sdiag -r >/dev/null || fail "sdiag -r (resetting the controller's statistics)"
    out=$(runuser -u "$USER_NAME" -- env SLURM_CONF="$SLURM_CONF" WHAT="$what" \
      srun -N4 --ntasks-per-node=1 --baton bash -c \
      '[ "$WHAT" = empty ] || touch "$BATON_LOCAL_DIR/shard.$SLURM_NODEID"; [ -d "$BATON_LOCAL_DIR" ] && echo "$SLURM_JOB_ID"') ||
      fail "the $what step failed: $out"
    job=$(sort -u <<<"$out")
    [[ $job =~ ^[0-9]+$ ]] || fail "the $what step's tasks did not all see their directory: '$out'"
    for n in n1 n2 n3 n4; do
      wait_for "$EPILOG_WAIT" "job $job's directory ($what) on $n to go" gone "$(dir_on "$n" "$job")"
    done
    expect_eq "$(rpc_count REQUEST_JOB_USER_INFO)" 0 "REQUEST_JOB_USER_INFO at the end of a 4-node job whose directories hold $what"
    expect_eq "$(rpc_count REQUEST_JOB_INFO_SINGLE)" "$([ "$what" = empty ] && echo 0 || echo 4)" \
      "REQUEST_JOB_INFO_SINGLE at the end of a 4-node job whose directories hold $what"
  done
}
test_a_jobs_end_asks_the_controller_nothing_for_empty_directories_and_one_question_per_node_else() { with_local_root sweep_cost; }

# A job requeued from n1 to n2: its directory on n1 stays while the job lives (a sweep on n1
# keeps it), the second run gets the same path, and after the job ends both go.
requeued_away() {
  local case job on_n1 on_n2
  ensure_user
  case=$(new_case)
  job=$(submit "$case" -N1 --requeue -x n2,n3,n4)
  wait_for 60 "job $job's first run" ready "$case" 0
  expect_eq "$(cat "$case/host.0")" n1 "the first run's node"
  on_n1=$(dir_on n1 "$job")
  [ -e "$on_n1/shard.0.0" ] || fail "no shard in $on_n1"
  # Requeue it held, move it to n2, release it.
  scontrol requeuehold "$job"
  wait_for 60 "job $job to be held" job_state_is "$job" PENDING
  wait_for "$EPILOG_WAIT" "n1 to finish job $job's epilog" node_idle n1
  [ -e "$on_n1/shard.0.0" ] || fail "the epilog of the requeued run removed $on_n1"
  scontrol update jobid="$job" excnodelist=n1,n3,n4
  scontrol release "$job"
  wait_for 90 "job $job's second run" ready "$case" 1
  expect_eq "$(cat "$case/host.1")" n2 "the second run's node"
  expect_eq "$(cat "$case/dir.1")" "$(cat "$case/dir.0")" "BATON_LOCAL_DIR of the second run"
  on_n2=$(dir_on n2 "$job")
  [ -e "$on_n2/shard.1.0" ] || fail "no shard in $on_n2"
  sweep_on n1
  [ -e "$on_n1/shard.0.0" ] || fail "a sweep on n1 removed $on_n1 while job $job runs on n2"
  touch "$case/go.1"
  wait_for 60 "job $job to end" job_ended "$job"
  expect_eq "$(job_field "$job" JobState)" COMPLETED "job $job's state"
  wait_for "$EPILOG_WAIT" "the directory on n2 to go" gone "$on_n2"
  [ -e "$on_n1" ] || fail "n1 had no job end since; its sweep cannot have run"
  sweep_on n1
  gone "$on_n1" || fail "the sweep on n1 left $on_n1 of ended job $job"
}
test_a_job_requeued_away_keeps_its_directory_while_it_lives_and_loses_it_after() { with_local_root requeued_away; }

# A job's node dies (its disk kept, as after a reboot); the job is requeued elsewhere; the node
# comes back with the directory on its disk: kept while the job runs, removed after it ended.
node_died_and_revived() {
  local case job on_n3 cluster
  cluster="$REPO/scripts/local-cluster"
  ensure_user
  case=$(new_case)
  job=$(submit "$case" -N1 --requeue -x n1,n2,n4)
  wait_for 60 "job $job's first run" ready "$case" 0
  on_n3=$(dir_on n3 "$job")
  [ -e "$on_n3/shard.0.0" ] || fail "no shard in $on_n3"
  "$cluster" kill-node --keep-disk n3
  [ -e "$on_n3/shard.0.0" ] || fail "kill-node --keep-disk wiped $on_n3"
  scontrol update jobid="$job" excnodelist=n3
  wait_for 120 "job $job's second run" ready "$case" 1
  "$cluster" revive-node n3
  sweep_on n3
  [ -e "$on_n3/shard.0.0" ] || fail "the sweep on revived n3 removed $on_n3 while job $job runs"
  touch "$case/go.1"
  wait_for 60 "job $job to end" job_ended "$job"
  sweep_on n3
  gone "$on_n3" || fail "the sweep on revived n3 left $on_n3 of ended job $job"
}
test_a_node_that_died_and_came_back_loses_the_ended_jobs_directory() { with_local_root node_died_and_revived; }

# The job ends while its dead node is down: the node's slurmd sweeps when it starts again,
# before any job runs there.
node_revived_after_the_job_ended() {
  local case job on_n4 cluster
  cluster="$REPO/scripts/local-cluster"
  ensure_user
  case=$(new_case)
  job=$(submit "$case" -N1 --requeue -x n1,n2,n3)
  wait_for 60 "job $job's first run" ready "$case" 0
  on_n4=$(dir_on n4 "$job")
  [ -e "$on_n4/shard.0.0" ] || fail "no shard in $on_n4"
  "$cluster" kill-node --keep-disk n4
  scancel "$job"
  wait_for 60 "job $job to end" job_ended "$job"
  [ -e "$on_n4/shard.0.0" ] || fail "$on_n4 went while n4 was down"
  "$cluster" revive-node n4
  gone "$on_n4" || fail "slurmd's start on n4 left $on_n4 of ended job $job"
  grep -F "removed node-local directory $LOCAL_ROOT/$(user_uid)/$job" "$BATON_CLUSTER_DIR/log/n4.log" ||
    fail "n4's slurmd log does not say it removed the directory"
}
test_a_node_revived_after_the_job_ended_sweeps_when_its_slurmd_starts() { with_local_root node_revived_after_the_job_ended; }

# The user's own --baton-local-dir is left alone: not made, not swept, not replaced.
own_dir() {
  local out
  out=$(srun -N1 -n1 -w n4 --baton --baton-local-dir=/somewhere/else bash -c 'echo "$BATON_LOCAL_DIR"')
  expect_eq "$out" /somewhere/else "BATON_LOCAL_DIR with --baton-local-dir"
  out=$(srun -N1 -n1 -w n4 bash -c 'echo "${BATON_LOCAL_DIR-UNSET}"')
  expect_eq "$out" UNSET "BATON_LOCAL_DIR without --baton"
  [ ! -e "$BATON_CLUSTER_DIR/disk/n4/baton/0" ] || ls -la "$BATON_CLUSTER_DIR/disk/n4/baton/0"
  [ ! -e "$BATON_CLUSTER_DIR/disk/n4/baton/0" ] || fail "a directory was made for a step that did not ask for one"
}
test_the_users_own_local_dir_and_steps_without_baton_get_none() { with_local_root own_dir; }

# A local root that fails the rule fails the step, naming the path, and the epilog leaves it.
unsafe_root() {
  local out rc=0
  mkdir -p "$BATON_CLUSTER_DIR/disk/n4/baton"
  chmod 0777 "$BATON_CLUSTER_DIR/disk/n4/baton"
  out=$(srun -N1 -n1 -w n4 --baton true 2>&1) || rc=$?
  chmod 0755 "$BATON_CLUSTER_DIR/disk/n4/baton"
  echo "$out"
  [ "$rc" -ne 0 ] || fail "a step ran with a world-writable local root"
  grep -qF "node-local directory '$LOCAL_ROOT' is not safe to use" <<<"$out" || fail "the message does not name the local root"
}
test_a_local_root_writable_by_others_fails_the_step_naming_it() { with_local_root unsafe_root; }
