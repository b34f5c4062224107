# shellcheck shell=bash
# shellcheck disable=SC2016  # the batch script's text expands in the job, not here
# Heterogeneous steps and jobs are one world (issue 30 item 1): srun's
# "A : B" and an sbatch hetjob's `srun --het-group=0,1` give ranks 0..N-1
# over all components, one MASTER_ADDR/PORT and the whole step's hostfile,
# and `baton env` in every task says the same. Before, every task of such a
# step failed ("BATON_STEP_NODE_ADDRS=... names 1 addresses for 3 nodes").
# And srun hands the whole step over (issue 30 item 3): the controller is
# asked once per component and once for the addresses, never per node
# (before: three step layouts and two node queries from every node).
# Sourced by run-all.

TASK_ENV="$REPO/tests/cluster/print-task-env"
export BATON_BIN="$BATON_BUILD_DIR/cli/baton"

# check_world FILE NTASKS NNODES [no-cli]: every task of FILE (print-task-env
# lines) is one rank of one world: RANK = SLURM_PROCID (which counts over
# the components), one MASTER_ADDR (rank 0's node) and MASTER_PORT, and
# baton env agrees, with and without the hand-over (not checked with
# no-cli: the tasks ran without BATON_BIN, so that only the plugin asked
# the controller).
check_world() {
  local file=$1 ntasks=$2 nnodes=$3 cli=${4:-cli} rank0_node
  expect_eq "$(grep -c 'SLURM_PROCID=' "$file")" "$ntasks" "tasks that reported"
  expect_eq "$(grep -o ' RANK=[0-9]*' "$file" | sort -t= -k2 -n | tr -d ' ' | tr '\n' ,)" \
    "$(seq -s, -f 'RANK=%g' 0 $((ntasks - 1))),"  "the ranks, once each"
  rank0_node=$(grep '^SLURM_PROCID=0 ' "$file" | grep -o 'SLURMD_NODENAME=[^ ]*' | cut -d= -f2)
  expect_eq "$(grep -o 'MASTER_ADDR=[^ ]*' "$file" | sort -u)" "MASTER_ADDR=$(node_addr "$rank0_node")" \
    "one MASTER_ADDR, rank 0's node $rank0_node"
  expect_eq "$(grep -o 'MASTER_PORT=[^ ]*' "$file" | sort -u | wc -l)" 1 "one MASTER_PORT"
  for_each_task "$file" check_world_task
}
check_world_task() {
  local who="task ${T[SLURM_PROCID]} on ${T[SLURMD_NODENAME]}"
  expect_eq "${T[RANK]}" "${T[SLURM_PROCID]}" "$who: RANK vs SLURM_PROCID"
  expect_eq "${T[WORLD_SIZE]}" "$ntasks" "$who: WORLD_SIZE"
  expect_eq "${T[NODE_RANK]}" "${T[SLURM_NODEID]}" "$who: NODE_RANK vs SLURM_NODEID"
  expect_eq "${T[LOCAL_RANK]}" "${T[SLURM_LOCALID]}" "$who: LOCAL_RANK vs SLURM_LOCALID"
  expect_eq "${T[BATON_NNODES]}" "$nnodes" "$who: BATON_NNODES"
  [ "$cli" = no-cli ] && return 0
  expect_eq "${T[CLI_MATCH]}" 1 "$who: baton env agrees with the plugin ($1)"
  expect_eq "${T[CLI_ALONE_MATCH]}" 1 "$who: baton env without the hand-over agrees"
}

# Each task runs print-task-env, then waits for all NTASKS to have done so:
# Slurm forgets a component's step layout once its tasks have ended, and
# `baton env` in a slower component would find the step gone.
# The steps run with --mpi=none: Slurm 22.05's mpi/pmix hangs srun at the end
# of a het step now and then (1 run in 8 here: srun waits for ever in
# pmixp_abort_agent_stop, joining the abort agent's thread, after every task
# has ended; a scancel of the job does not end it). That is Slurm's, not
# baton's, and these cases test the plugin's world, which no MPI plugin
# changes. docs/testing.md says so.
TOGETHER='"$1" >"$2/out-$SLURM_PROCID"; tr "\n" " " <"$BATON_HOSTFILE" >"$2/hostfile-$SLURM_PROCID"; touch "$2/done-$SLURM_PROCID"
  for _ in $(seq 600); do [ "$(ls "$2" | grep -c "^done-")" -ge "$3" ] && exit 0; sleep 0.1; done; exit 1'

test_a_heterogeneous_srun_step_is_one_world() {
  local d
  d=$(case_dir)
  # Component 1 cyclic over two nodes: ranks 1 and 3 on its first node.
  timeout 180 srun --mpi=none --baton --baton-hostfile-format=plain -N1 -n1 -w n1 bash -c "$TOGETHER" _ "$TASK_ENV" "$d" 4 \
    : --mpi=none -N2 -n3 -w 'n[2-3]' -m cyclic bash -c "$TOGETHER" _ "$TASK_ENV" "$d" 4 ||
    fail "the het step failed or did not end within 180 s (exit $?): $(cluster_unsettled)"
  cat "$d"/out-* >"$d/out"
  cat "$d/out"
  check_world "$d/out" 4 3
  local a1 a2 a3
  a1=$(node_addr n1) a2=$(node_addr n2) a3=$(node_addr n3)
  expect_eq "$(cat "$d/hostfile-3")" "$a1 $a2 $a3 $a2 " "the plain hostfile: every rank's node, in rank order"
}

# A het step's requests to the controller, counted by sdiag: srun asks for
# each component's layout and the nodes' addresses once; the nodes ask
# nothing.
test_a_heterogeneous_step_asks_the_controller_per_component_not_per_node() {
  local d counts
  d=$(case_dir)
  sdiag -r >/dev/null || fail "sdiag -r (resetting the controller's statistics)"
  timeout 180 srun --mpi=none --baton --baton-hostfile-format=plain -N1 -n1 -w n1 env -u BATON_BIN bash -c "$TOGETHER" _ "$TASK_ENV" "$d" 5 \
    : --mpi=none -N3 -n4 -w 'n[2-4]' -m cyclic env -u BATON_BIN bash -c "$TOGETHER" _ "$TASK_ENV" "$d" 5 ||
    fail "the het step failed or did not end within 180 s (exit $?): $(cluster_unsettled)"
  counts="$(rpc_count REQUEST_STEP_LAYOUT) $(rpc_count REQUEST_NODE_INFO) $(rpc_count REQUEST_NODE_INFO_SINGLE)"
  cat "$d"/out-* >"$d/out"
  cat "$d/out"
  check_world "$d/out" 5 4 no-cli
  expect_eq "$counts" "2 1 0" \
    "requests for a 2-component 4-node step: REQUEST_STEP_LAYOUT REQUEST_NODE_INFO REQUEST_NODE_INFO_SINGLE"
}

# A het step inside an ordinary allocation: Slurm 22.05 sets no
# SLURM_HET_SIZE there, the components share the job id, and the
# controller's merged layout numbers each component's tasks from 0. srun
# refuses it before any task starts, saying what to do instead (before, the
# error said only "task id 0 appears on both n1 and n2").
test_a_heterogeneous_step_in_an_ordinary_allocation_is_refused_saying_why() {
  local d rc=0
  d=$(case_dir)
  timeout 120 salloc -N2 -n2 srun --baton -N1 -n1 touch "$d/ran" : -N1 -n1 touch "$d/ran" >"$d/out" 2>&1 || rc=$?
  cat "$d/out"
  [ "$rc" -ne 0 ] || fail "the step ran (salloc exit 0)"
  [ "$rc" -ne 124 ] || fail "salloc did not end within 120 s"
  [ ! -e "$d/ran" ] || fail "a task ran"
  # Which two nodes salloc was given is the scheduler's choice (n1 and n4 after a suite that
  # restarted n2 and n3): any two.
  grep -Eq "task id 0 appears on both n[0-9]+ and n[0-9]+ \\(a heterogeneous step 'srun A : B' inside an allocation that is not a heterogeneous job" "$d/out" ||
    fail "srun's refusal does not say why"
  grep -q "allocate a heterogeneous job, 'salloc/sbatch ... : ...'" "$d/out" || fail "srun's refusal does not say what to do"
}

test_an_sbatch_hetjob_is_one_world() {
  local d job
  d=$(case_dir)
  cat >"$d/job.sh" <<JOB
#!/bin/bash
#SBATCH --baton -N1 -n1 -w n1
#SBATCH hetjob
#SBATCH -N2 -n2 -w n[3-4]
tr '\n' '|' <"\$BATON_HOSTFILE" >"$d/batch-hostfile"
"\$BATON_BIN" hostfile >"$d/batch-cli-hostfile"
srun --mpi=none --het-group=0,1 bash -c '$TOGETHER' _ "$TASK_ENV" "$d" 3
cat "$d"/out-* >"$d/out"
mkdir "$d/group1"
srun --mpi=none --het-group=1 bash -c '$TOGETHER' _ "$TASK_ENV" "$d/group1" 2
cat "$d"/group1/out-* >"$d/group1/out"
mkdir "$d/counted"
sdiag -r >/dev/null
BATON_BIN= srun --mpi=none --het-group=0,1 bash -c '$TOGETHER' _ "$TASK_ENV" "$d/counted" 3
sdiag >"$d/counted/sdiag"
cat "$d"/counted/out-* >"$d/counted/out"
JOB
  job=$(sbatch --parsable -o "$d/log" "$d/job.sh")
  wait_for 120 "hetjob $job to complete" job_state_is "$job" COMPLETED
  cat "$d/log" "$d/out"
  expect_eq "$(cat "$d/batch-hostfile")" "n1 slots=1|n3 slots=1|n4 slots=1|" "the batch script's hostfile: every component's nodes"
  expect_eq "$(tr '\n' '|' <"$d/batch-cli-hostfile")" "n1 slots=1|n3 slots=1|n4 slots=1|" "baton hostfile in the batch script"
  check_world "$d/out" 3 3
  # A step of the second component alone is that component's own world
  # (its tasks carry the leader's SLURM_JOB_ID; baton env finds the step).
  cat "$d/group1/out"
  check_world "$d/group1/out" 2 2
  # srun --het-group=0,1 in the batch script: srun asks once per component,
  # the nodes nothing.
  cat "$d/counted/out"
  check_world "$d/counted/out" 3 3 no-cli
  expect_eq "$(rpc_count REQUEST_STEP_LAYOUT "$d/counted/sdiag") $(rpc_count REQUEST_NODE_INFO "$d/counted/sdiag") $(rpc_count REQUEST_NODE_INFO_SINGLE "$d/counted/sdiag")" \
    "2 1 0" "requests for srun --het-group=0,1 over 3 nodes: REQUEST_STEP_LAYOUT REQUEST_NODE_INFO REQUEST_NODE_INFO_SINGLE"
}
