# shellcheck shell=bash
# shellcheck disable=SC2016  # single-quoted commands and awk/perl programs run in another shell (srun's, bash -c) or language, which expands them
# spank_baton.so on the local cluster: every task's variables against
# Slurm's own, for each distribution; options and plugstack errors; the
# hostfile's content, owner, mode and removal; GPU binding; a TCP
# rendezvous using only what baton set. Every address is the one the
# cluster gives its nodes (scontrol show node), never a written-in one.
# Sourced by run-all.

TASK_ENV="$REPO/tests/cluster/print-task-env"
export BATON_BIN="$BATON_BUILD_DIR/cli/baton"

# addrs NODE...: the nodes' addresses, one per line.
addrs() { local n; for n in "$@"; do node_addr "$n"; done; }

# check_tasks FILE NTASKS: every line of print-task-env output agrees with Slurm.
check_tasks() {
  local file=$1 ntasks=$2 lines rank0_node rank0_addr ports
  lines=$(grep -c 'SLURM_PROCID=' "$file" || true)
  expect_eq "$lines" "$ntasks" "tasks that reported"
  # MASTER_ADDR is where rank 0 runs (its TCPStore listens there), which is
  # not the step's first node under -m arbitrary.
  rank0_node=$(grep '^SLURM_PROCID=0 ' "$file" | grep -o 'SLURMD_NODENAME=[^ ]*' | cut -d= -f2)
  rank0_addr=$(node_addr "$rank0_node")
  [ -n "$rank0_addr" ] || fail "no address for rank 0's node '$rank0_node'"
  for_each_task "$file" check_task
  ports=$(grep -o 'MASTER_PORT=[0-9]*' "$file" | sort -u | wc -l)
  expect_eq "$ports" 1 "distinct MASTER_PORT values within one step"
}
check_task() {
  local who="task ${T[SLURM_PROCID]} on ${T[SLURMD_NODENAME]}"
  expect_eq "${T[RANK]}" "${T[SLURM_PROCID]}" "$who: RANK vs SLURM_PROCID"
  expect_eq "${T[LOCAL_RANK]}" "${T[SLURM_LOCALID]}" "$who: LOCAL_RANK vs SLURM_LOCALID"
  expect_eq "${T[NODE_RANK]}" "${T[SLURM_NODEID]}" "$who: NODE_RANK vs SLURM_NODEID"
  expect_eq "${T[GROUP_RANK]}" "${T[SLURM_NODEID]}" "$who: GROUP_RANK vs SLURM_NODEID"
  expect_eq "${T[WORLD_SIZE]}" "${T[SLURM_STEP_NUM_TASKS]}" "$who: WORLD_SIZE"
  expect_eq "${T[LOCAL_WORLD_SIZE]}" "${T[GTIDS_COUNT]}" "$who: LOCAL_WORLD_SIZE vs SLURM_GTIDS"
  expect_eq "${T[GROUP_WORLD_SIZE]}" "${T[SLURM_STEP_NUM_NODES]}" "$who: GROUP_WORLD_SIZE"
  expect_eq "${T[BATON_NNODES]}" "${T[SLURM_STEP_NUM_NODES]}" "$who: BATON_NNODES"
  expect_eq "${T[MASTER_ADDR]}" "$rank0_addr" "$who: MASTER_ADDR (address of rank 0's node $rank0_node)"
  expect_eq "${T[HOSTFILE_STAT]}" "$(id -un):600" "$who: hostfile owner:mode"
  expect_eq "${T[CLI_MATCH]}" 1 "$who: baton env agrees with the plugin ($1)"
  expect_eq "${T[CLI_ALONE_MATCH]}" 1 "$who: baton env without the plugin's hand-over agrees"
  # Slurm reserved ports for the step (MpiParams=ports): the first is MASTER_PORT.
  if [ "${T[SLURM_STEP_RESV_PORTS]}" != UNSET ]; then
    expect_eq "${T[MASTER_PORT]}" "${T[SLURM_STEP_RESV_PORTS]%%[-,]*}" "$who: MASTER_PORT vs SLURM_STEP_RESV_PORTS"
  else
    { [ "${T[MASTER_PORT]}" -ge 61000 ] && [ "${T[MASTER_PORT]}" -le 65535 ]; } || fail "$who: MASTER_PORT ${T[MASTER_PORT]}"
  fi
}

run_step() {  # run_step OUTFILE NTASKS SRUN_ARGS...
  local out=$1 n=$2
  shift 2
  srun "$@" --baton "$TASK_ENV" >"$out"
  cat "$out"
  check_tasks "$out" "$n"
}

test_block_N4_n8() {
  local d; d=$(case_dir)
  run_step "$d/out" 8 -N4 -n8 -m block
}

test_cyclic_N4_n8() {
  local d; d=$(case_dir)
  run_step "$d/out" 8 -N4 -n8 -m cyclic
  # Cyclic: rank 1 is on the second node, unlike block.
  grep -q 'SLURM_PROCID=1 SLURM_LOCALID=0 SLURM_NODEID=1 ' "$d/out" || fail "rank 1 is not on node 1"
}

test_uneven_N3_n7() {
  local d; d=$(case_dir)
  run_step "$d/out" 7 -N3 -n7 --overcommit
}

test_plane_N2_n6() {
  local d; d=$(case_dir)
  run_step "$d/out" 6 -N2 -n6 -m plane=2 --overcommit
}

test_arbitrary_with_a_hostfile() {
  local d; d=$(case_dir)
  printf 'n3\nn1\nn1\nn2\nn3\n' >"$d/hosts"
  SLURM_HOSTFILE="$d/hosts" run_step "$d/out" 5 -n5 -m arbitrary
  # Rank 0 runs where the hostfile put it, and MASTER_ADDR follows it
  # (check_tasks), though n1 is the step's first node.
  grep -q 'SLURM_PROCID=0 .*SLURMD_NODENAME=n3 ' "$d/out" || fail "rank 0 is not on n3"
  grep -q "MASTER_ADDR=$(node_addr n3) " "$d/out" || fail "MASTER_ADDR is not n3's address"
}

# srun hands the step over twice (man spank-baton(8), HAND-OVER): in the
# launch request as hidden option values and in srun's environment. Either
# way srun's two questions are the step's only ones (no node asks), and
# the variable through which srun gives an option its value reaches no task
# (a nested srun would take it for its own step's). A guard: the
# --export=NONE case that failed before is in test_site_settings.sh.
test_a_step_costs_the_controller_srun_s_two_questions_and_no_task_sees_the_option_variables() {
  local d counts
  d=$(case_dir)
  sdiag -r >/dev/null || fail "sdiag -r (resetting the controller's statistics)"
  srun -N4 -n8 --baton bash -c 'env | grep -c "^_SLURM_SPANK_OPTION_baton_baton_hand_over" ; echo "RANK=$RANK MASTER_ADDR=$MASTER_ADDR"' >"$d/out"
  counts="$(rpc_count REQUEST_STEP_LAYOUT) $(rpc_count REQUEST_NODE_INFO) $(rpc_count REQUEST_NODE_INFO_SINGLE)"
  cat "$d/out"
  expect_eq "$(grep -cx 0 "$d/out")" 8 "tasks without _SLURM_SPANK_OPTION_baton_baton_hand_over_* variables"
  expect_eq "$(grep -o 'MASTER_ADDR=[^ ]*' "$d/out" | sort -u)" "MASTER_ADDR=$(node_addr n1)" "MASTER_ADDR"
  expect_eq "$counts" "1 1 0" "requests for one 4-node step: REQUEST_STEP_LAYOUT REQUEST_NODE_INFO REQUEST_NODE_INFO_SINGLE"
}

test_tcp_rendezvous_where_rank_0_is_not_on_the_first_node() {
  # Rank 0 listens on MASTER_ADDR: with the first node's address it could
  # not even bind there (each node has its own network).
  local d out; d=$(case_dir)
  printf 'n3\nn1\nn2\nn4\n' >"$d/hosts"
  out=$(SLURM_HOSTFILE="$d/hosts" srun -n4 -m arbitrary --baton "$BATON_BUILD_DIR/tests/cluster/tcp_rendezvous" 2>&1)
  echo "$out"
  expect_eq "$(grep -c '^rendezvous ok' <<<"$out")" 4 "ranks that completed the rendezvous"
}

test_plain_hostfile_lists_ranks_in_order_for_cyclic() {
  local d; d=$(case_dir)
  srun -w 'n[1-2]' -N2 -n4 -m cyclic --baton --baton-hostfile-format=plain bash -c '[ "$RANK" = 0 ] && cat "$BATON_HOSTFILE"; true' >"$d/out"
  expect_eq "$(tr '\n' ' ' <"$d/out")" "$(addrs n1 n2 n1 n2 | tr '\n' ' ')" "plain hostfile of a cyclic step"
}

test_hostfile_formats() {
  # mpirun and Hydra start their daemons through srun: node names. pdsh
  # (DeepSpeed) and horovodrun ssh to what the file says: the NodeAddr (a
  # node's name need not resolve where the launcher runs).
  local f expected got a1 a2
  a1=$(node_addr n1) a2=$(node_addr n2)
  for f in openmpi deepspeed mpich horovod; do
    case $f in
      openmpi) expected="n1 slots=2|n2 slots=1|" ;;
      deepspeed|horovod) expected="$a1 slots=2|$a2 slots=1|" ;;
      mpich) expected="n1:2|n2:1|" ;;
    esac
    got=$(srun -w 'n[1-2]' -N2 -n3 --baton --baton-hostfile-format=$f bash -c '[ "$RANK" = 0 ] && cat "$BATON_HOSTFILE"; true' | tr '\n' '|')
    expect_eq "$got" "$expected" "hostfile format $f"
  done
  # DeepSpeed's slots are GPUs: --gres=gpu:2 on every node.
  got=$(srun -w 'n[1-2]' -N2 -n3 --gres=gpu:2 --baton --baton-hostfile-format=deepspeed bash -c '[ "$RANK" = 0 ] && cat "$BATON_HOSTFILE"; true' | tr '\n' '|')
  expect_eq "$got" "$a1 slots=2|$a2 slots=2|" "deepspeed hostfile of a step with 2 GPUs per node"
}

test_cli_hostfile_and_json_match_the_plugin() {
  local out
  local d; d=$(case_dir)
  addrs n1 n1 n2 >"$d/plain"
  out=$(PLAIN="$d/plain" srun -w 'n[1-2]' -N2 -n3 --baton --baton-hostfile-format=mpich bash -c \
    '[ "$RANK" = 0 ] || exit 0; diff "$BATON_HOSTFILE" <("$BATON_BIN" hostfile) && echo HOSTFILE_SAME;
     diff <("$BATON_BIN" hostfile --format=plain) "$PLAIN" && echo PLAIN_SAME;
     "$BATON_BIN" env --format=json')
  echo "$out"
  grep -qx HOSTFILE_SAME <<<"$out" || fail "baton hostfile differs from the plugin's (BATON_HOSTFILE_FORMAT=mpich)"
  grep -qx PLAIN_SAME <<<"$out" || fail "baton hostfile --format=plain is not the ranks in order"
  grep -q '"RANK": "0"' <<<"$out" || fail "baton env --format=json lacks RANK"
  grep -q "\"MASTER_ADDR\": \"$(node_addr n1)\"" <<<"$out" || fail "baton env --format=json lacks MASTER_ADDR"
}

test_cli_outside_a_job_names_what_is_missing() {
  local out rc=0
  out=$(env -u SLURM_JOB_ID "$BATON_BIN" env 2>&1) || rc=$?
  echo "$out"
  expect_eq "$rc" 1 "exit status outside a job"
  grep -q "SLURM_JOB_ID is not set" <<<"$out" || fail "the message does not name SLURM_JOB_ID"
  # A slurm.conf that is not there: at once, naming it (libslurm would retry for a minute).
  rc=0
  local t0=$SECONDS
  out=$(srun -N1 -n1 bash -c 'env -u BATON_STEP_TASK_MAP -u BATON_STEP_MASTER_ADDR SLURM_CONF=/nonexistent/slurm.conf "$BATON_BIN" env' 2>&1) || rc=$?
  echo "$out"
  expect_eq "$rc" 1 "exit status without slurm.conf"
  [ $((SECONDS - t0)) -lt 10 ] || fail "took $((SECONDS - t0)) s"
  grep -qF "SLURM_CONF='/nonexistent/slurm.conf' names no file" <<<"$out" || fail "the message does not name SLURM_CONF"
  rc=0
  out=$("$BATON_BIN" env --format=yaml 2>&1) || rc=$?
  expect_eq "$rc" 2 "exit status for a bad --format"
  grep -q "invalid value 'yaml'" <<<"$out" || fail "the message does not name the value: $out"
}

test_hostfile_is_removed_when_the_step_ends() {
  local path
  path=$(srun -N1 -n1 --baton bash -c 'echo "$BATON_HOSTFILE"; test -f "$BATON_HOSTFILE"')
  [ -n "$path" ] || fail "no BATON_HOSTFILE"
  # slurmstepd reports the tasks' exit to srun before its plugins' exit runs.
  wait_for 10 "hostfile $path to be removed" test ! -e "$path"
  wait_for 10 "directory $(dirname "$path") to be removed" test ! -e "$(dirname "$path")"
}

test_sbatch_job_script_and_two_concurrent_steps() {
  local d job
  d=$(case_dir)
  cat >"$d/job.sh" <<JOB
#!/bin/bash
#SBATCH --baton
echo "BATCH RANK=\${RANK-UNSET} LOCAL_RANK=\${LOCAL_RANK-UNSET} MASTER_ADDR=\$MASTER_ADDR MASTER_PORT=\$MASTER_PORT"
echo "BATCH_HOSTFILE \$(tr '\n' '|' < "\$BATON_HOSTFILE")"
srun -N2 -n3 --exact "$TASK_ENV" > "$d/step-a" &
srun -N2 -n4 --exact "$TASK_ENV" > "$d/step-b" &
wait
JOB
  job=$(sbatch --parsable -N4 -n8 -o "$d/out" "$d/job.sh")
  wait_for 120 "job $job to complete" job_state_is "$job" COMPLETED
  cat "$d/out" "$d/step-a" "$d/step-b"
  grep -q "^BATCH RANK=UNSET LOCAL_RANK=UNSET MASTER_ADDR=$(node_addr n1) MASTER_PORT=[0-9]" "$d/out" ||
    fail "batch script environment wrong"
  local a; a=$(printf '%s slots=2\n' n1 n2 n3 n4 | tr '\n' '|')
  grep -qF "BATCH_HOSTFILE $a" "$d/out" || fail "allocation hostfile wrong (expected $a)"
  check_tasks "$d/step-a" 3
  check_tasks "$d/step-b" 4
  local pa pb pbatch
  pa=$(grep -o 'MASTER_PORT=[0-9]*' "$d/step-a" | head -n 1)
  pb=$(grep -o 'MASTER_PORT=[0-9]*' "$d/step-b" | head -n 1)
  pbatch=$(grep -o 'MASTER_PORT=[0-9]*' "$d/out" | head -n 1)
  { [ "$pa" != "$pb" ] && [ "$pa" != "$pbatch" ] && [ "$pb" != "$pbatch" ]; } ||
    fail "ports of the batch script and two concurrent steps are not all different: $pbatch $pa $pb"
}

test_options_reach_the_tasks_with_precedence() {
  local out
  out=$(srun -N1 -n1 --baton --baton-master-port=23456 --baton-ckpt-dir=/ckpt/a --baton-local-dir=/local/b \
        bash -c 'echo "$MASTER_PORT $BATON_CKPT_DIR $BATON_LOCAL_DIR"')
  expect_eq "$out" "23456 /ckpt/a /local/b" "options on the command line"
  out=$(BATON_MASTER_PORT=34567 srun -N1 -n1 --baton bash -c 'echo "$MASTER_PORT"')
  expect_eq "$out" 34567 "BATON_MASTER_PORT"
  out=$(BATON_MASTER_PORT=34567 srun -N1 -n1 --baton --baton-master-port=45678 bash -c 'echo "$MASTER_PORT"')
  expect_eq "$out" 45678 "the command line wins over BATON_MASTER_PORT"
  # Every form srun's getopt_long accepts: "--opt value" and abbreviations.
  out=$(BATON_MASTER_PORT=34567 srun -N1 -n1 --baton --baton-master-port 45678 bash -c 'echo "$MASTER_PORT"')
  expect_eq "$out" 45678 "--baton-master-port 45678 (value as the next word)"
  out=$(BATON_MASTER_PORT=34567 srun -N1 -n1 --baton --baton-mas=45678 bash -c 'echo "$MASTER_PORT"')
  expect_eq "$out" 45678 "--baton-mas=45678 (an abbreviation)"
  out=$(BATON_HOSTFILE_FORMAT=plain srun -w n1 -N1 -n2 --baton --baton-hostfile-f mpich bash -c '[ "$RANK" = 0 ] && cat "$BATON_HOSTFILE"; true')
  expect_eq "$out" "n1:2" "--baton-hostfile-f mpich (an abbreviation, value as the next word)"
  out=$(srun -N1 -n1 bash -c 'echo "${RANK-UNSET}"')
  expect_eq "$out" UNSET "without --baton nothing is set (default=off)"
  out=$(BATON_ENABLE=on srun -N1 -n1 bash -c 'echo "${RANK-UNSET}"')
  expect_eq "$out" 0 "BATON_ENABLE=on"
}

test_sbatch_lines_lose_to_the_environment_and_the_command_line() {
  local d job
  d=$(case_dir)
  printf '#!/bin/bash\n#SBATCH --baton --baton-master-port=11111\nsrun -n1 bash -c '"'"'echo "PORT=$MASTER_PORT"'"'"'\n' >"$d/job.sh"
  job=$(BATON_MASTER_PORT=22222 sbatch --parsable -N1 -o "$d/env" "$d/job.sh")
  wait_for 60 "job $job" job_state_is "$job" COMPLETED
  job=$(BATON_MASTER_PORT=22222 sbatch --parsable -N1 --baton-master-port=33333 -o "$d/cmd" "$d/job.sh")
  wait_for 60 "job $job" job_state_is "$job" COMPLETED
  job=$(sbatch --parsable -N1 -o "$d/script" "$d/job.sh")
  wait_for 60 "job $job" job_state_is "$job" COMPLETED
  cat "$d/env" "$d/cmd" "$d/script"
  expect_eq "$(cat "$d/script")" "PORT=11111" "#SBATCH line alone"
  expect_eq "$(cat "$d/env")" "PORT=22222" "BATON_MASTER_PORT over the #SBATCH line"
  expect_eq "$(cat "$d/cmd")" "PORT=33333" "the command line over both"
}

# --- invalid options: srun and sbatch fail before anything runs ----------------------
expect_rejected() {  # expect_rejected NEEDLE COMMAND...
  local needle=$1 out rc=0 marker
  shift
  marker=$(case_dir)/ran
  out=$("$@" touch "$marker" 2>&1) || rc=$?
  echo "$out"
  [ "$rc" -ne 0 ] || fail "'$*' succeeded"
  [ ! -e "$marker" ] || fail "the program ran although the option was invalid"
  grep -qF -- "$needle" <<<"$out" || fail "message does not name '$needle'"
}

test_invalid_baton_value() { expect_rejected "--baton: invalid value 'maybe'" srun -n1 --baton=maybe; }
test_invalid_hostfile_format() { expect_rejected "--baton-hostfile-format: invalid value 'xml'" srun -n1 --baton-hostfile-format=xml; }
test_the_old_hostfile_option_works_and_warns() {
  # --baton-hostfile set a format while BATON_HOSTFILE is a path: renamed,
  # the old name kept as an alias that says so where it was typed.
  local d out err
  d=$(case_dir)
  out=$(srun -w n1 -N1 -n2 --baton --baton-hostfile=mpich bash -c '[ "$RANK" = 0 ] && cat "$BATON_HOSTFILE"; true' 2>"$d/err")
  err=$(cat "$d/err")
  echo "$err"
  expect_eq "$out" "n1:2" "--baton-hostfile=mpich still sets the format"
  grep -qF -- "--baton-hostfile is now --baton-hostfile-format" <<<"$err" || fail "no warning about the old name: $err"
  expect_eq "$(grep -c 'is now --baton-hostfile-format' <<<"$err")" 1 "warnings (srun's alone, not one per node or task)"
  expect_rejected "--baton-hostfile and --baton-hostfile-format given twice with different values: 'mpich' and 'plain'" \
    srun -n1 --baton-hostfile=mpich --baton-hostfile-format=plain
}
test_invalid_master_port() { expect_rejected "--baton-master-port: invalid value '99999'" srun -n1 --baton-master-port=99999; }
test_invalid_gpu_bind() { expect_rejected "--baton-gpu-bind: invalid value 'all'" srun -n1 --baton-gpu-bind=all; }
test_invalid_ckpt_dir() { expect_rejected "--baton-ckpt-dir: invalid value 'rel/dir'" srun -n1 --baton-ckpt-dir=rel/dir; }
test_invalid_local_dir() { expect_rejected "--baton-local-dir: invalid value 'x'" srun -n1 --baton-local-dir=x; }
test_invalid_environment_variable() {
  BATON_GPU_BIND=sometimes expect_rejected "BATON_GPU_BIND: invalid value 'sometimes'" srun -n1 --baton
}
test_option_twice_with_different_values() {
  expect_rejected "--baton-hostfile-format given twice with different values: 'mpich' and 'plain'" \
    srun -n1 --baton-hostfile-format=mpich --baton-hostfile-format=plain
}
test_invalid_option_fails_sbatch_before_submission() {
  local before out rc=0
  before=$(squeue -h | wc -l)
  out=$(sbatch --baton-hostfile-format=xml --wrap true 2>&1) || rc=$?
  echo "$out"
  [ "$rc" -ne 0 ] || fail "sbatch accepted --baton-hostfile-format=xml"
  grep -qF -- "--baton-hostfile-format: invalid value 'xml'" <<<"$out" || fail "message does not name the option and value"
  expect_eq "$(squeue -h | wc -l)" "$before" "jobs queued after a rejected sbatch"
}

# --- plugstack.conf arguments: strict -------------------------------------------------
# with_plugstack_args: tests/cluster/lib.sh
test_plugstack_unknown_key() { with_plugstack_args "colour=blue" expect_rejected "unknown key 'colour'" srun -n1; }
test_plugstack_bad_default() { with_plugstack_args "default=maybe" expect_rejected "plugstack.conf default: invalid value 'maybe'" srun -n1; }
test_plugstack_bad_port_range() { with_plugstack_args "port_range=9-1" expect_rejected "plugstack.conf port_range: invalid value '9-1'" srun -n1; }
test_plugstack_bad_hostfile_dir() { with_plugstack_args "hostfile_dir=/x/%q" expect_rejected "plugstack.conf hostfile_dir: invalid value '/x/%q'" srun -n1; }
test_plugstack_bad_gpu_bind() { with_plugstack_args "gpu_bind=any" expect_rejected "plugstack.conf gpu_bind: invalid value 'any'" srun -n1; }
test_plugstack_bad_local_root() { with_plugstack_args "local_root=local/baton" expect_rejected "plugstack.conf local_root: invalid value 'local/baton'" srun -n1; }

test_plugstack_default_on_and_port_range() {
  local out
  # port_range serves steps without reserved ports (--resv-ports=0 here).
  out=$(with_plugstack_args "default=on port_range=20000-20009" srun -N2 -n2 --resv-ports=0 bash -c 'echo "$RANK $MASTER_PORT"')
  echo "$out"
  expect_eq "$(wc -l <<<"$out")" 2 "tasks"
  awk '{ if ($2 < 20000 || $2 > 20009) exit 1 }' <<<"$out" || fail "MASTER_PORT outside port_range 20000-20009"
  out=$(with_plugstack_args "default=on" srun -n1 --baton=off bash -c 'echo "${RANK-UNSET}"')
  expect_eq "$out" UNSET "--baton=off with default=on"
}

# --- GPUs -------------------------------------------------------------------------------
test_gpu_bind_local_rank_gives_each_task_its_gpu() {
  local out
  # The contract: LOCAL_RANK keeps its meaning; BATON_DEVICE is the index
  # among the devices the task sees (set_device(BATON_DEVICE) is always right).
  out=$(srun -N1 -n2 --gres=gpu:2 --baton --baton-gpu-bind=local-rank bash -c 'echo "$LOCAL_RANK $CUDA_VISIBLE_DEVICES $BATON_DEVICE"' | sort)
  echo "$out"
  expect_eq "$(tr '\n' '|' <<<"$out")" "0 0 0|1 1 0|" "CUDA_VISIBLE_DEVICES and BATON_DEVICE per local rank"
  out=$(srun -N1 -n2 --gres=gpu:2 --baton bash -c 'echo "$LOCAL_RANK $CUDA_VISIBLE_DEVICES $BATON_DEVICE"' | sort)
  expect_eq "$(tr '\n' '|' <<<"$out")" "0 0,1 0|1 0,1 1|" "without gpu-bind every task sees the step's GPUs"
  expect_rejected "Slurm gave this step no GPUs" srun -N1 -n1 --baton --baton-gpu-bind=local-rank
  # Tasks that would share the step's one GPU: no device is a task's own.
  expect_rejected "2 tasks on n1 but Slurm gave the step 1 GPUs there" srun -w n1 -N1 -n2 --gres=gpu:1 --baton --baton-gpu-bind=local-rank
}

# check_gpu_task LINE (for_each_task): the task's BATON_DEVICE is one of
# the devices it sees; adds that device to the caller's `devices`.
check_gpu_task() {
  local who="$slurm --baton-gpu-bind=$bind, local rank ${T[SLURM_LOCALID]}" dev
  local -a seen
  if [ "${T[CUDA_VISIBLE_DEVICES]}" = UNSET ]; then
    # --gpu-bind=none: CUDA numbers the devices the task may open from 0.
    mapfile -t seen < <(seq 0 $((T[SLURM_GPUS_ON_NODE] - 1)))
  else
    IFS=, read -r -a seen <<<"${T[CUDA_VISIBLE_DEVICES]}"
  fi
  dev=${T[BATON_DEVICE]}
  { [[ $dev =~ ^[0-9]+$ ]] && ((dev < ${#seen[@]})); } ||
    fail "$who: BATON_DEVICE='$dev' is not one of the ${#seen[@]} devices it sees ($1)"
  devices+=("${seen[$dev]}")
  expect_eq "${T[CLI_MATCH]}" 1 "$who: baton env agrees with the plugin ($1)"
  expect_eq "${T[CLI_ALONE_MATCH]}" 1 "$who: baton env without the hand-over agrees"
}

# Every binding of Slurm's (the table in man/spank-baton.8) with each of
# baton's: each of the two tasks gets a BATON_DEVICE among the devices it
# sees, the two use different GPUs, and `baton env` inside agrees with the
# plugin (with and without the hand-over).
test_gpu_bind_every_combination_of_slurms_and_batons() {
  local d slurm bind n=0
  local -a devices
  d=$(case_dir)
  while IFS= read -r slurm; do
    for bind in none local-rank; do
      # shellcheck disable=SC2086 # $slurm is a list of srun options
      srun -w n1 -N1 -n2 $slurm --baton --baton-gpu-bind=$bind "$TASK_ENV" </dev/null >"$d/out" 2>&1 || true
      devices=()
      for_each_task "$d/out" check_gpu_task
      ((${#devices[@]} == 2)) || fail "$slurm --baton-gpu-bind=$bind: ${#devices[@]} tasks reported: $(cat "$d/out")"
      [ "${devices[0]}" != "${devices[1]}" ] || fail "$slurm --baton-gpu-bind=$bind: both tasks on GPU ${devices[0]}"
      n=$((n + 1))
    done
  done <<'EOF'
--gres=gpu:2
--gpus=2
--gpus-per-task=1
--gres=gpu:2 --gpu-bind=single:1
--gres=gpu:2 --gpu-bind=map_gpu:1,0
--gres=gpu:2 --gpu-bind=mask_gpu:0x1,0x2
--gres=gpu:2 --gpu-bind=closest
--gpus-per-task=1 --gpu-bind=none
EOF
  expect_eq "$n" 16 "combinations run"
}

# --- an ordinary user ---------------------------------------------------------------------
test_names_planted_by_another_user_cost_the_user_nothing() {
  id baton-test >/dev/null 2>&1 || useradd --system --no-create-home --shell /bin/bash baton-test
  # The old default directory was /tmp/baton-<user>: anyone could make it
  # first and fail every --baton step of that user. The directory is now
  # made fresh, with an unpredictable name.
  local planted="/tmp/baton-baton-test" out marker
  marker=$(case_dir)/ran
  chmod 777 "$(dirname "$marker")"
  rm -rf "$planted"
  mkdir -m 0777 "$planted"
  out=$(runuser -u baton-test -- env SLURM_CONF="$SLURM_CONF" MARKER="$marker" srun -N1 -n1 --baton \
        bash -c 'test -f "$BATON_HOSTFILE" && touch "$MARKER" && echo "$BATON_HOSTFILE"' 2>&1) || true
  rm -rf "$planted"
  echo "$out"
  [ -e "$marker" ] || fail "the step did not run beside a planted directory"
  [[ $out != "$planted"* ]] || fail "the hostfile went into the planted directory"
}

test_a_failed_user_init_fails_the_step_with_its_message() {
  # An unsafe hostfile directory (world-writable, not sticky) fails
  # user_init. Slurm would then start no task and srun exit 0: the step
  # must fail instead, with the reason on the user's terminal.
  local d open out rc=0
  d=$(case_dir)
  open="$d/open"
  mkdir -m 0777 "$open"
  chmod 0777 "$open"
  out=$(with_plugstack_args "hostfile_dir=$open/%j.%s.%n" srun -N2 -n2 --baton touch "$d/ran" 2>&1) || rc=$?
  echo "$out"
  [ "$rc" -ne 0 ] || fail "srun exited 0"
  [ ! -e "$d/ran" ] || fail "the program ran"
  grep -qF "hostfile directory '$open' is not safe to use" <<<"$out" || fail "the message is not on srun's stderr"
}

test_program_arguments_are_not_baton_options() {
  local out
  out=$(srun -N1 -n1 --baton --baton-hostfile-format=plain bash -c 'echo "$MASTER_PORT $BATON_HOSTFILE"; cat "$BATON_HOSTFILE" | wc -l' \
        --baton-master-port=1234 --baton-hostfile-format=mpich)
  echo "$out"
  [ "$(head -n 1 <<<"$out" | cut -d' ' -f1)" != 1234 ] || fail "a program argument set MASTER_PORT"
}

test_hostfile_of_an_ordinary_user() {
  id baton-test >/dev/null 2>&1 || useradd --system --no-create-home --shell /bin/bash baton-test
  local out path
  out=$(runuser -u baton-test -- env SLURM_CONF="$SLURM_CONF" srun -N2 -n2 --baton \
        bash -c 'echo "$(id -un) $BATON_HOSTFILE $(stat -c "%U:%a" "$BATON_HOSTFILE") $(stat -c "%U:%a" "$(dirname "$BATON_HOSTFILE")")"')
  echo "$out"
  expect_eq "$(awk '{print $1, $3, $4}' <<<"$out" | sort -u)" "baton-test baton-test:600 baton-test:700" \
    "user, hostfile owner:mode, directory owner:mode"
  local paths
  mapfile -t paths < <(awk '{print $2}' <<<"$out")
  for path in "${paths[@]}"; do
    wait_for 10 "hostfile $path to be removed" test ! -e "$path"
  done
}

# --- MASTER_PORT: two jobs on one node ---------------------------------------------------
test_two_jobs_on_one_node_get_different_master_ports() {
  # Two jobs whose rank 0 shares n1, their steps running at the same time:
  # each step's MASTER_PORT is the first of the ports Slurm reserved for it
  # (MpiParams=ports), which no other step on the node holds meanwhile.
  local d a b pa pb
  d=$(case_dir)
  mkfifo "$d/go-a" "$d/go-b"
  for x in a b; do
    cat >"$d/job-$x.sh" <<JOB
#!/bin/bash
srun -n1 --baton bash -c 'echo "\$MASTER_PORT \$SLURM_STEP_RESV_PORTS" > "$d/port-$x.tmp" && mv "$d/port-$x.tmp" "$d/port-$x"; read -r _ < "$d/go-$x"'
JOB
  done
  a=$(sbatch --parsable -w n1 -n1 -o "$d/out-a" "$d/job-a.sh")
  b=$(sbatch --parsable -w n1 -n1 -o "$d/out-b" "$d/job-b.sh")
  # Both steps hold their ports now: each waits on its fifo.
  wait_for 60 "both steps to start" test -e "$d/port-a" -a -e "$d/port-b"
  echo go >"$d/go-a"
  echo go >"$d/go-b"
  wait_for 60 "job $a" job_state_is "$a" COMPLETED
  wait_for 60 "job $b" job_state_is "$b" COMPLETED
  read -r pa ra <"$d/port-a"
  read -r pb rb <"$d/port-b"
  echo "job $a: MASTER_PORT=$pa (reserved $ra); job $b: MASTER_PORT=$pb (reserved $rb)"
  [ "$pa" != "$pb" ] || fail "two concurrent jobs on n1 got MASTER_PORT $pa"
  expect_eq "$pa" "${ra%%[-,]*}" "job $a: the first reserved port"
  expect_eq "$pb" "${rb%%[-,]*}" "job $b: the first reserved port"
}

# The batch scripts' MASTER_PORT (issue 30 item 7): Slurm reserves no port
# for them, so each one's slurmstepd claims one of port_range on its node.
# A range of two ports and three batch scripts on n1 at once: before, the
# hash gave at least two of them one port (three jobs, two ports); now the
# first two hold different ports and the third fails, naming the range.
batch_ports_of_three_jobs() {
  local d=$1 x jobs=()
  for x in a b c; do
    jobs+=("$(sbatch --parsable --baton -w n1 -n1 -o "$d/out-$x" \
      --wrap "echo \"\$MASTER_PORT\" >$d/port-$x; \"\$BATON_BIN\" env | sed -n 's/^export MASTER_PORT=//p' >$d/cli-$x; sleep 8")")
  done
  for x in "${jobs[@]}"; do wait_for 60 "job $x to end" bash -c "squeue -h -j $x | grep -q . && exit 1 || exit 0"; done
}
test_two_batch_scripts_on_one_node_never_share_master_port() {
  local d ports
  d=$(case_dir)
  with_plugstack_args "port_range=61000-61001 port_dir=$BATON_CLUSTER_DIR/master-ports" batch_ports_of_three_jobs "$d"
  head -n 20 "$d"/out-* "$d"/port-* "$d"/cli-* || true
  ports=$(cat "$d"/port-* 2>/dev/null | sort | tr '\n' ' ')
  expect_eq "$ports" "61000 61001 " "the batch scripts' MASTER_PORTs (one job of three has none)"
  local x
  for x in a b c; do
    [ -s "$d/port-$x" ] || { grep -q "every port of port_range 61000-61001 is held by another job" "$d/out-$x" ||
      fail "job $x got no port and no message naming the range: $(cat "$d/out-$x")"; continue; }
    expect_eq "$(tr -d "'" <"$d/cli-$x")" "$(cat "$d/port-$x")" "job $x: baton env's MASTER_PORT in the batch script"
  done
}

# --- salloc on the login node ----------------------------------------------------------
test_baton_env_and_hostfile_inside_salloc_on_the_login_node() {
  # salloc's shell runs here, on no node of the allocation (no SLURMD_NODENAME).
  local out
  out=$(salloc -w 'n[1-2]' -N2 -n4 bash -c '"$BATON_BIN" env && echo --- && "$BATON_BIN" hostfile --format=mpich' 2>&1)
  echo "$out"
  grep -qx "export MASTER_ADDR='$(node_addr n1)'" <<<"$out" || fail "MASTER_ADDR of the allocation"
  grep -q "^export RANK=" <<<"$out" && fail "the allocation's shell has no rank"
  { grep -qx "n1:2" <<<"$out" && grep -qx "n2:2" <<<"$out"; } || fail "the allocation's hostfile (node names: Hydra launches through srun)"
}

# Inside salloc (run without a terminal: salloc -N2 COMMAND): a --baton step is checked task by
# task against Slurm as any other step, with rank 0 away from the allocation's first node; the
# interactive step (srun --interactive, what salloc runs with LaunchParameters=
# use_interactive_step) is the allocation: its hostfile and master on the first node, no rank.
test_srun_and_the_interactive_step_inside_salloc() {
  local d out
  d=$(case_dir)
  printf 'n2\nn1\nn1\n' >"$d/hosts"
  out=$(salloc -w 'n[1-2]' -N2 -n4 bash -c "
    echo \"allocation \$SLURM_JOB_ID\"
    srun --baton -N2 -n4 -m cyclic '$TASK_ENV' >'$d/cyclic'
    SLURM_HOSTFILE='$d/hosts' srun --baton -n3 -m arbitrary '$TASK_ENV' >'$d/arbitrary'
    srun --interactive --preserve-env --baton bash -c \
      'echo \"interactive on \$SLURMD_NODENAME step \$SLURM_STEP_ID rank \${RANK-none} master \$MASTER_ADDR hostfile \$BATON_HOSTFILE\"; sed \"s/^/hostfile: /\" \"\$BATON_HOSTFILE\"'
  " 2>&1)
  echo "$out"
  cat "$d/cyclic" "$d/arbitrary"
  check_tasks "$d/cyclic" 4
  check_tasks "$d/arbitrary" 3
  grep -q 'SLURM_PROCID=0 .*SLURMD_NODENAME=n2 ' "$d/arbitrary" || fail "-m arbitrary (n2 n1 n1) did not put rank 0 on n2"
  local job
  job=$(sed -n 's/^allocation //p' <<<"$out")
  [ -n "$job" ] || fail "salloc ran no command"
  grep -Eqx "interactive on n1 step [0-9]+ rank none master $(node_addr n1) hostfile .*/baton\.$job\.interactive\.[A-Za-z0-9]{8}/hostfile" <<<"$out" ||
    fail "the interactive step: the allocation's master (n1's address), no rank, a hostfile named after the interactive step"
  if ! grep -qx "hostfile: n1 slots=2" <<<"$out" || ! grep -qx "hostfile: n2 slots=2" <<<"$out"; then
    fail "the interactive step's hostfile lists the allocation's nodes and their tasks"
  fi
}

# --- a real rendezvous -------------------------------------------------------------------
test_tcp_rendezvous_with_only_master_addr_port_rank_world_size() {
  local out
  out=$(srun -N4 -n4 --baton "$BATON_BUILD_DIR/tests/cluster/tcp_rendezvous")
  echo "$out"
  expect_eq "$(grep -c '^rendezvous ok' <<<"$out")" 4 "ranks that completed the rendezvous"
}
