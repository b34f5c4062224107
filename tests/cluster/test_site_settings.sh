# shellcheck shell=bash
# shellcheck disable=SC2016  # single-quoted commands run in the job's shell
# Slurm settings sites run (issue 30 item 3): srun --export=NONE (srun's
# environment, and with it the plugin's hand-over, never reaches the
# tasks), and PrivateData=nodes (the controller refuses node records to
# users). Before, every --baton srun of an ordinary user failed under
# PrivateData=nodes ("local_user_init: slurm_load_node failed:
# Access/permission denied"). Sourced by run-all.

TASK_ENV="$REPO/tests/cluster/print-task-env"
BATON_BIN="$BATON_BUILD_DIR/cli/baton"

# The variables a task sees under --export=NONE are Slurm's alone: PATH and
# BATON_BIN are given on the command line.
export_none_step() {
  srun --export=NONE --baton --baton-hostfile-format=plain "$@" \
    /usr/bin/env PATH=/usr/bin:/bin BATON_BIN="$BATON_BIN" "$TASK_ENV"
}

# check_one_world FILE NTASKS MASTER: RANK = SLURM_PROCID, WORLD_SIZE,
# MASTER_ADDR, and baton env agreeing in every task.
check_one_world() {
  local file=$1 n=$2 master=$3 line
  expect_eq "$(grep -c 'SLURM_PROCID=' "$file")" "$n" "tasks that reported"
  expect_eq "$(grep -o 'MASTER_ADDR=[^ ]*' "$file" | sort -u)" "MASTER_ADDR=$master" "MASTER_ADDR"
  while read -r line; do
    declare -A t=()
    local kv
    for kv in $line; do t[${kv%%=*}]=${kv#*=}; done
    local who="task ${t[SLURM_PROCID]} on ${t[SLURMD_NODENAME]}"
    expect_eq "${t[RANK]}" "${t[SLURM_PROCID]}" "$who: RANK"
    expect_eq "${t[WORLD_SIZE]}" "$n" "$who: WORLD_SIZE"
    expect_eq "${t[NODE_RANK]}" "${t[SLURM_NODEID]}" "$who: NODE_RANK"
    expect_eq "${t[CLI_MATCH]}" 1 "$who: baton env agrees with the plugin ($line)"
    unset t
  done < <(grep 'SLURM_PROCID=' "$file")
}

test_export_none_keeps_the_command_lines_options_and_one_world() {
  local d
  d=$(case_dir)
  export_none_step -N2 -n4 -m cyclic -w 'n[1-2]' >"$d/out"
  cat "$d/out"
  check_one_world "$d/out" 4 "$(scontrol show node n1 | tr ' ' '\n' | sed -n 's/^NodeAddr=//p')"
  # --baton-hostfile-format=plain came on srun's command line: slurmstepd gets it
  # from SPANK's option replay, not from srun's environment.
  grep -q 'HOSTFILE_STAT=' "$d/out" || fail "no hostfile line"
}

# with_private_data_nodes COMMAND...: runs COMMAND with PrivateData=nodes
# in force (slurm.conf, scontrol reconfigure), then restores the
# configuration, also when COMMAND fails.
with_private_data_nodes() {
  local saved rc=0
  saved=$(cat "$SLURM_CONF")
  echo "PrivateData=nodes" >>"$SLURM_CONF"
  scontrol reconfigure || fail "scontrol reconfigure"
  ("$@") || rc=$?
  printf '%s\n' "$saved" >"$SLURM_CONF"
  scontrol reconfigure || fail "scontrol reconfigure (restoring the configuration)"
  return $rc
}

private_data_case() {
  local d=$1
  runuser -u baton-test -- env SLURM_CONF="$SLURM_CONF" scontrol show node n1 >"$d/scontrol" 2>&1 &&
    fail "PrivateData=nodes is not in force: an ordinary user sees node records ($(head -n 2 "$d/scontrol"))"
  runuser -u baton-test -- env SLURM_CONF="$SLURM_CONF" BATON_BIN="$BATON_BIN" \
    srun -N2 -n2 -w 'n[1-2]' --baton "$TASK_ENV" >"$d/out" 2>"$d/err" || true
  cat "$d/out" "$d/err"
  # The user may not read NodeAddr: the node names stand for the nodes
  # (they resolve on every node of this cluster, as on a site whose
  # NodeAddr is the default).
  check_one_world "$d/out" 2 n1
}

test_private_data_nodes_gives_an_ordinary_user_one_world_by_node_names() {
  id baton-test >/dev/null 2>&1 || useradd --system --no-create-home --shell /bin/bash baton-test
  local d
  d=$(case_dir)
  with_private_data_nodes private_data_case "$d"
}
