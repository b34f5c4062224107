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

# check_one_world FILE NTASKS MASTER [no-cli]: RANK = SLURM_PROCID,
# WORLD_SIZE, MASTER_ADDR, MASTER_PORT and the hostfile in every task, and
# baton env agreeing (not checked with no-cli: tasks that ran no `baton
# env`, whose questions to the controller would count with the plugin's).
check_one_world() {
  local file=$1 n=$2 master=$3 cli=${4:-cli}
  expect_eq "$(grep -c 'SLURM_PROCID=' "$file")" "$n" "tasks that reported"
  expect_eq "$(grep -o 'MASTER_ADDR=[^ ]*' "$file" | sort -u)" "MASTER_ADDR=$master" "MASTER_ADDR"
  for_each_task "$file" check_world_task
}
check_world_task() {
  local who="task ${T[SLURM_PROCID]} on ${T[SLURMD_NODENAME]}"
  expect_eq "${T[RANK]}" "${T[SLURM_PROCID]}" "$who: RANK"
  expect_eq "${T[WORLD_SIZE]}" "$n" "$who: WORLD_SIZE"
  expect_eq "${T[NODE_RANK]}" "${T[SLURM_NODEID]}" "$who: NODE_RANK"
  expect_eq "${T[LOCAL_RANK]}" "${T[SLURM_LOCALID]}" "$who: LOCAL_RANK"
  [[ ${T[MASTER_PORT]} =~ ^[0-9]+$ ]] || fail "$who: MASTER_PORT='${T[MASTER_PORT]}' ($1)"
  [ "${T[HOSTFILE_STAT]}" != missing ] || fail "$who: no hostfile at BATON_HOSTFILE='${T[BATON_HOSTFILE]}'"
  [ "$cli" != cli ] || expect_eq "${T[CLI_MATCH]}" 1 "$who: baton env agrees with the plugin ($1)"
}

test_export_none_keeps_the_command_lines_options_and_one_world() {
  local d
  d=$(case_dir)
  export_none_step -N2 -n4 -m cyclic -w 'n[1-2]' >"$d/out"
  cat "$d/out"
  check_one_world "$d/out" 4 "$(node_addr n1)"
  # --baton-hostfile-format=plain came on srun's command line: slurmstepd gets it
  # from SPANK's option replay, not from srun's environment.
  grep -q 'HOSTFILE_STAT=' "$d/out" || fail "no hostfile line"
}

# Issue 30 item 3: under --export=NONE srun's hand-over reaches every
# slurmstepd in the launch request (the values of hidden SPANK options), so
# a 4-node step costs the controller srun's two questions (the step's
# layout, the nodes' addresses) and none from the nodes. Before: 5 step
# layouts, 5 node tables and 4 single-node records, every node asking at
# once (thousands at 4,096 nodes).
test_export_none_asks_the_controller_once_per_step_not_once_per_node() {
  local d counts
  d=$(case_dir)
  sdiag -r >/dev/null || fail "sdiag -r (resetting the controller's statistics)"
  srun --export=NONE --baton --baton-hostfile-format=plain -N4 -n8 -m cyclic \
    /usr/bin/env PATH=/usr/bin:/bin "$TASK_ENV" >"$d/out"
  counts="$(rpc_count REQUEST_STEP_LAYOUT) $(rpc_count REQUEST_NODE_INFO) $(rpc_count REQUEST_NODE_INFO_SINGLE)"
  cat "$d/out"
  check_one_world "$d/out" 8 "$(node_addr n1)" no-cli
  expect_eq "$counts" "1 1 0" "requests for one 4-node step: REQUEST_STEP_LAYOUT REQUEST_NODE_INFO REQUEST_NODE_INFO_SINGLE"
}

# with_private_data_nodes COMMAND...: runs COMMAND with PrivateData=nodes
# in force (slurm.conf, scontrol reconfigure), then restores the
# configuration, also when COMMAND fails.
with_private_data_nodes() {
  local saved rc=0
  saved=$(cat "$SLURM_CONF")
  printf '%s\nPrivateData=nodes\n' "$saved" | replace_file "$SLURM_CONF"
  scontrol reconfigure || fail "scontrol reconfigure"
  ("$@") || rc=$?
  printf '%s\n' "$saved" | replace_file "$SLURM_CONF"
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
  # --export=NONE as well: the hand-over (node names, srun being refused
  # the node records) comes in the launch request; no node asks.
  sdiag -r >/dev/null || fail "sdiag -r"
  runuser -u baton-test -- env SLURM_CONF="$SLURM_CONF" \
    srun --export=NONE -N2 -n2 -w 'n[1-2]' --baton /usr/bin/env PATH=/usr/bin:/bin "$TASK_ENV" >"$d/out-none" 2>"$d/err-none" || true
  expect_eq "$(rpc_count REQUEST_STEP_LAYOUT) $(rpc_count REQUEST_NODE_INFO_SINGLE)" "1 0" \
    "REQUEST_STEP_LAYOUT REQUEST_NODE_INFO_SINGLE of an --export=NONE step under PrivateData=nodes"
  cat "$d/out-none" "$d/err-none"
  check_one_world "$d/out-none" 2 n1 no-cli
}

test_private_data_nodes_gives_an_ordinary_user_one_world_by_node_names() {
  id baton-test >/dev/null 2>&1 || useradd --system --no-create-home --shell /bin/bash baton-test
  local d
  d=$(case_dir)
  with_private_data_nodes private_data_case "$d"
}
