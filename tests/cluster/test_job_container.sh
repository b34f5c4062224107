# shellcheck shell=bash
# shellcheck disable=SC2016  # single-quoted commands run in srun's shell
# Slurm's job_container/tmpfs (issue 30 item 5): each job gets a private
# /tmp that its tasks join, while SPANK's user_init runs outside it (Slurm
# 22.05 has no SlurmdParameters=contain_spank). The hostfile user_init
# wrote in the node's /tmp must still be at BATON_HOSTFILE in the task.
# A 2-node cluster of its own (scripts/local-cluster start --job-container)
# beside the suites' one, outside /tmp (the job's private /tmp would hide
# the cluster's task prolog), on the next port base. Sourced by run-all.

JC_PORT_BASE=$((${BATON_CLUSTER_PORT_BASE:-16800} + 100))
JC_DIR=/var/tmp/baton-job-container-$JC_PORT_BASE

# skip_if_slurm_made_no_container JOB: Slurm 22.05's job_container/tmpfs fails
# to make the job's namespace now and then here (about 1 job in 3 on a loaded
# 2-core machine: "_create_ns: ns base mount failed: Invalid argument", or
# "_mount_private_tmp: /tmp mount failed, No such file or directory", in the
# node's log for the job's extern step), before any task or any of baton's
# callbacks runs. The case then says SKIP naming it; it is not run again.
skip_if_slurm_made_no_container() {
  local job=$1 line
  line=$(grep -hE "\[$job\.extern\] error: (_create_ns|_mount_private_tmp)" "$JC_DIR"/log/n*.log | head -n 1) || true
  if [ -n "$line" ]; then
    echo "SKIP: Slurm made no job container for job $job (not baton's doing): $line"
    exit 77
  fi
}

# Starts the job-container cluster and points SLURM_CONF at it; stops it
# when the case's shell exits.
use_job_container_cluster() {
  local env
  trap '"$REPO/scripts/local-cluster" stop --dir "$JC_DIR" >/dev/null 2>&1 || true' EXIT
  # The plugin goes beside the cluster: srun in a batch script runs in the
  # job's private /tmp, where a build tree under /tmp (a clone in /tmp/x)
  # is not there ("Dlopen of plugin file failed"). It needs no other file.
  mkdir -p "$JC_DIR"
  install -m 0755 "$BATON_BUILD_DIR/spank/.libs/spank_baton.so" "$JC_DIR/spank_baton.so"
  env=$("$REPO/scripts/local-cluster" start --job-container --nodes 2 --dir "$JC_DIR" --port-base "$JC_PORT_BASE" \
        --plugin "$JC_DIR/spank_baton.so") || fail "the job-container cluster did not start"
  eval "$env"
}

test_the_hostfile_is_at_its_path_inside_the_jobs_private_tmp() {
  local out line marker path d job rc
  use_job_container_cluster
  d=$(mktemp -d "$JC_DIR/case.XXXXXX")
  chmod 777 "$d"
  marker=$(mktemp /tmp/baton-host-tmp-marker.XXXXXX)
  # The job's /tmp is its own (the host's marker is not there); every
  # task finds the hostfile at BATON_HOSTFILE. Before, 'No such file'.
  out=$(srun -N2 -n4 --baton bash -c 'test -e "$1" && echo "sees the host /tmp"; echo "$RANK $BATON_HOSTFILE $(tr "\n" "|" <"$BATON_HOSTFILE")"' \
        sh "$marker" 2>"$d/err") || {
    # srun names no job id when its allocation fails; the controller's log does.
    skip_if_slurm_made_no_container "$(sed -n 's/.*_slurm_rpc_allocate_resources JobId=\([0-9]*\).*/\1/p' "$JC_DIR/log/slurmctld.log" | tail -n 1)"
    fail "the step failed: $(cat "$d/err")"
  }
  rm -f "$marker"
  echo "$out"
  ! grep -q "sees the host /tmp" <<<"$out" || fail "the job's /tmp is the host's: job_container/tmpfs is not in effect"
  expect_eq "$(grep -c '|$' <<<"$out")" 4 "tasks that read the hostfile"
  while read -r line; do
    expect_eq "$(cut -d" " -f3- <<<"$line")" "n1 slots=2|n2 slots=2|" "hostfile of rank ${line%% *}"
    path=$(cut -d' ' -f2 <<<"$line")
  done <<<"$out"
  # user_init's copy, in the nodes' (here the host's) /tmp, goes at the
  # step's end: in slurm_spank_exit, which slurmstepd runs after it told
  # srun that the tasks ended, so srun may return first.
  wait_for 15 "user_init's copy $path to go at the step's end" test ! -e "$path"

  # As an ordinary user, whose private /tmp is their own (mode 0700): the
  # batch script's hostfile (user_init of the batch step) and a step's.
  id baton-test >/dev/null 2>&1 || useradd --system --no-create-home --shell /bin/bash baton-test
  # --no-requeue: a launch that fails in Slurm's container ends the job
  # (with the cluster's default it is requeued and held, and --wait waits
  # for ever); the bound is for any other way the job never ends.
  # -D: the batch script starts in a directory the job's private /tmp does
  # not hide (Slurm's chdir warning would otherwise join the output).
  # A job whose container Slurm did not make ends "completed" (exit 0) with
  # no output under --no-requeue: the log is looked at whatever sbatch says.
  rc=0
  job=$(runuser -u baton-test -- timeout 180 sbatch --parsable --no-requeue -N2 -n2 --baton --baton-hostfile-format=mpich --wait -D "$d" -o "$d/out" --wrap \
    'cat "$BATON_HOSTFILE"; srun --baton bash -c "[ \$RANK = 1 ] && stat -c %U:%a \"\$BATON_HOSTFILE\"; true"') || rc=$?
  skip_if_slurm_made_no_container "${job%%;*}"
  { [ "$rc" = 0 ] && [ -e "$d/out" ]; } || fail "the batch job ${job%%;*} failed (sbatch exit $rc): $(cat "$d/out" 2>&1)"
  out=$(cat "$d/out")
  echo "$out"
  expect_eq "$(head -n 2 <<<"$out" | tr '\n' '|')" "n1:1|n2:1|" "the batch script's hostfile"
  expect_eq "$(tail -n 1 <<<"$out")" "baton-test:600" "a step's hostfile, the user's and private"
}
