# shellcheck shell=bash
# Cases for tests/spank/cli-env.sh (make check): `baton env` and `baton
# hostfile` against hostile environments, without a cluster. Every value a
# job's environment can hold is tried in every variable the derivation
# reads; whatever comes in, the CLI ends within seconds, never crashes,
# and prints either well-formed lines or one error naming the variable.
BATON="$BATON_BUILD_DIR/cli/baton"
# In the build tree cli/baton is libtool's wrapper script, whose own start
# (a shell, sed) cost 60 of the 105 ms of each launch here; the program
# behind it is run directly, given the library directory the wrapper adds.
BATON_LIBS=""
if [ -x "$BATON_BUILD_DIR/cli/.libs/baton" ] && [ -d "$BATON_BUILD_DIR/.libs" ]; then
  BATON="$BATON_BUILD_DIR/cli/.libs/baton" BATON_LIBS="$BATON_BUILD_DIR/.libs"
fi

# A task of step 5.0 on n1 of n[1-2], with srun's hand-over: nothing needs Slurm.
base_env() {
  printf '%s\n' SLURM_JOB_ID=5 SLURM_STEP_ID=0 SLURM_STEP_NODELIST='n[1-2]' SLURM_STEP_NUM_NODES=2 \
    SLURM_STEP_TASKS_PER_NODE='2(x2)' SLURM_NODEID=0 SLURM_PROCID=2 SLURM_LOCALID=1 \
    BATON_STEP_TASK_MAP=5.0:cyclic BATON_STEP_MASTER_ADDR=5.0:10.0.0.1 BATON_STEP_NODE_ADDRS=5.0:=names
}

# run_with NAME VALUE COMMAND...: the command under base_env with NAME=VALUE
# (SLURM_CONF names an empty file: a question to Slurm fails at once).
run_with() {
  local name=$1 value=$2
  shift 2
  local -a env=()
  while IFS= read -r kv; do env+=("$kv"); done < <(base_env)
  env+=("$name=$value" "SLURM_CONF=$EMPTY_CONF" "PATH=$PATH")
  [ -z "$BATON_LIBS" ] || env+=("LD_LIBRARY_PATH=$BATON_LIBS")
  timeout 10 env -i "${env[@]}" "$@"
}

test_the_base_environment_derives() {
  EMPTY_CONF=$(mktemp)
  local out
  out=$(run_with BATON_ENABLE on "$BATON" env)
  echo "$out"
  grep -qx "export RANK='2'" <<<"$out" || fail "RANK"
  grep -qx "export LOCAL_RANK='1'" <<<"$out" || fail "LOCAL_RANK"
  grep -qx "export MASTER_ADDR='10.0.0.1'" <<<"$out" || fail "MASTER_ADDR"
  rm -f "$EMPTY_CONF"
}

test_hostile_values_end_in_a_clean_answer() {
  EMPTY_CONF=$(mktemp)
  local vars=(SLURM_JOB_ID SLURM_STEP_ID SLURM_STEP_NODELIST SLURM_STEP_NUM_NODES SLURM_STEP_TASKS_PER_NODE
              SLURM_NODEID SLURM_PROCID SLURM_LOCALID SLURM_RESTART_COUNT SLURM_STEP_RESV_PORTS
              SLURM_GPUS_PER_NODE SLURM_GPUS_ON_NODE CUDA_VISIBLE_DEVICES BATON_STEP_TASK_MAP BATON_STEP_MASTER_ADDR
              BATON_STEP_NODE_ADDRS BATON_HOSTFILE_FORMAT BATON_MASTER_PORT BATON_CKPT_DIR)
  local ranges="" i
  for i in $(seq 1 300); do ranges+="h$i-[1-65535],"; done
  local values=("" "-1" "0" "+1" " 1" "1 " "0x10" "1e3" "99999999999999999999" "4294967295" "4294967292"
                $'n1\nn2 slots=99' $'a\tb' $'\x01' "n[" "n[1-2" "n]" "n[1-65535]" "${ranges%,}"
                "5.0:" "5.0:0*2,7" "5.0:spiral" "5.0:plane=0" "5.0:=ask" "4.0:cyclic" "$(head -c 70000 /dev/zero | tr '\0' x)"
                "gres:gpu:" "1-99999" "/rel" "ümlaut" "'; rm -rf /; '")
  # 744 launches of the CLI: each one's cost is the process start (the
  # dynamic loader, and ASan's or TSan's start under the sanitizers), so
  # they run a core's worth at a time and are checked afterwards, in order.
  local -a names=() vals=() cmds=()
  local name value cmd
  for name in "${vars[@]}"; do
    for value in "${values[@]}"; do
      for cmd in env hostfile; do
        # The hostfile reads the same facts plus these; the rest once is enough.
        [ "$cmd" = hostfile ] && [[ " SLURM_STEP_NODELIST SLURM_STEP_TASKS_PER_NODE BATON_STEP_TASK_MAP BATON_STEP_NODE_ADDRS BATON_HOSTFILE_FORMAT " != *" $name "* ]] && continue
        names+=("$name") vals+=("$value") cmds+=("$cmd")
      done
    done
  done
  local dir i running=0 jobs
  dir=$(mktemp -d)
  jobs=$(nproc 2>/dev/null || echo 2)
  for i in "${!names[@]}"; do
    (
      t0=$SECONDS rc=0
      run_with "${names[i]}" "${vals[i]}" "$BATON" "${cmds[i]}" >"$dir/$i.out" 2>&1 || rc=$?
      echo "$rc $((SECONDS - t0))" >"$dir/$i.rc"
    ) &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
      wait -n
      running=$((running - 1))
    fi
  done
  wait
  local out rc secs n=0 slow=0
  for i in "${!names[@]}"; do
    name=${names[i]} value=${vals[i]} cmd=${cmds[i]}
    n=$((n + 1))
    [ -s "$dir/$i.rc" ] || fail "baton $cmd with $name=$(printf %q "$value"): no exit status recorded"
    read -r rc secs <"$dir/$i.rc"
    out=$(cat "$dir/$i.out")
    [ "$secs" -lt 5 ] || slow=$((slow + 1))
    [ "$rc" -lt 124 ] || fail "baton $cmd with $name=$(printf %q "$value"): exit $rc: $out"
    if [ "$rc" -eq 0 ] && [ "$cmd" = env ]; then
      # Every line one well-formed, single-quoted export.
      if grep -vqE "^export [A-Z_]+='[^']*'\$" <<<"$out"; then
        fail "baton env with $name=$(printf %q "$value") printed a malformed line: $out"
      fi
    elif [ "$rc" -eq 0 ]; then
      # A hostfile: one host per line, no blank, no control character.
      if grep -vqE '^[^[:space:][:cntrl:]#,]+( slots=[0-9]+|:[0-9]+)?$' <<<"$out"; then
        fail "baton hostfile with $name=$(printf %q "$value") printed a malformed line: $out"
      fi
    elif ! grep -q "baton $cmd: " <<<"$out"; then
      fail "baton $cmd with $name=$(printf %q "$value") failed without its message: $out"
    fi
  done
  rm -rf "$dir"
  echo "$n runs, $slow slower than 5 s"
  expect_eq "$slow" 0 "runs slower than 5 s"
  rm -f "$EMPTY_CONF"
}

test_a_bad_variable_is_named_in_the_error() {
  EMPTY_CONF=$(mktemp)
  local case name value out
  # The hand-over variables are tagged with their step (5.0:); an untagged
  # one is another step's and is ignored, so these carry the tag.
  for case in "SLURM_STEP_NODELIST=n1"$'\n'"evil" "SLURM_STEP_NODELIST=n[" "SLURM_STEP_NODELIST=n[1-2" \
              "SLURM_PROCID=-1" "SLURM_PROCID=4" "SLURM_STEP_RESV_PORTS=1-99999" "SLURM_NODEID=x" \
              "BATON_STEP_TASK_MAP=5.0:" "BATON_STEP_TASK_MAP=5.0:0*2,7" \
              "BATON_STEP_MASTER_ADDR=5.0:10.0.0.1"$'\n'"EVIL=1" "BATON_STEP_NODE_ADDRS=5.0:a,b,c"; do
    name=${case%%=*} value=${case#*=}
    for cmd in env hostfile; do
      [ "$cmd" = env ] && [ "$name" = BATON_STEP_NODE_ADDRS ] && continue  # only the hostfile reads it
      out=$(run_with "$name" "$value" "$BATON" "$cmd" 2>&1) && fail "$name=$(printf %q "$value") was accepted: $out"
      grep -q "$name" <<<"$out" || fail "the error for $name=$(printf %q "$value") does not name it: $out"
      [ "$(wc -l <<<"$out")" -eq 1 ] || fail "the error for $name=$(printf %q "$value") spans lines: $out"
    done
  done
  rm -f "$EMPTY_CONF"
}

# A task of heterogeneous step 5.0 (components 5 on n1 and 6 on n2) with
# srun's hand-over of the whole step: BATON_STEP_HET_COMPONENTS is read.
het_env() {
  printf '%s\n' SLURM_JOB_ID=5 SLURM_STEP_ID=0 SLURM_STEP_NODELIST='n[1-2]' SLURM_STEP_NUM_NODES=2 \
    SLURM_STEP_TASKS_PER_NODE='2(x2)' SLURM_NODEID=0 SLURM_PROCID=1 SLURM_LOCALID=1 SLURM_HET_SIZE=2 \
    SLURM_JOB_ID_PACK_GROUP_0=5 SLURM_JOB_ID_PACK_GROUP_1=6 BATON_STEP_TASK_MAP=5.0:block \
    BATON_STEP_MASTER_ADDR=5.0:10.0.0.1 BATON_STEP_NODE_ADDRS=5.0:=names
}

test_hostile_het_components_end_in_a_clean_answer() {
  EMPTY_CONF=$(mktemp)
  local -a env=()
  while IFS= read -r kv; do env+=("$kv"); done < <(het_env)
  env+=("SLURM_CONF=$EMPTY_CONF" "PATH=$PATH")
  [ -z "$BATON_LIBS" ] || env+=("LD_LIBRARY_PATH=$BATON_LIBS")
  local out rc value t0
  out=$(timeout 10 env -i "${env[@]}" BATON_STEP_HET_COMPONENTS='5.0:5=1,6=1;n[1-2]' "$BATON" env 2>&1) ||
    fail "the handed-over het step does not derive: $out"
  grep -qx "export WORLD_SIZE='4'" <<<"$out" || fail "WORLD_SIZE of the handed-over het step: $out"
  grep -qx "export RANK='1'" <<<"$out" || fail "RANK of the handed-over het step: $out"
  # Malformed, inconsistent or oversized lists: refused naming the variable.
  for value in "5.0:" "5.0:;" "5.0:5=1,6=1" "5.0:5=1,6=1;n[1-3]" "5.0:5=0,6=2;n[1-2]" "5.0:5=1,6=1;n[2,1]" \
               "5.0:5=1,7=1;n[1-2]" "5.0:99999999999999999999=1;n1" "5.0:5=1,6=1;n[1-65535]" "5.0:5=1,,6=1;n[1-2]" \
               $'5.0:5=1\n6=1;n[1-2]' "5.0:$(head -c 70000 /dev/zero | tr '\0' x)" "5.0:5=1,6=1;n[1-2" "5.0:5=-1,6=3;n[1-2]"; do
    t0=$SECONDS rc=0
    out=$(timeout 10 env -i "${env[@]}" BATON_STEP_HET_COMPONENTS="$value" "$BATON" env 2>&1) || rc=$?
    [ $((SECONDS - t0)) -lt 5 ] || fail "BATON_STEP_HET_COMPONENTS=$(printf %q "$value"): $((SECONDS - t0)) s"
    [ "$rc" -ne 0 ] || fail "BATON_STEP_HET_COMPONENTS=$(printf %q "$value") was accepted: $out"
    [ "$rc" -lt 124 ] || fail "BATON_STEP_HET_COMPONENTS=$(printf %q "$value"): exit $rc: $out"
    grep -q "^baton env: .*BATON_STEP_HET_COMPONENTS" <<<"$out" ||
      fail "the error for BATON_STEP_HET_COMPONENTS=$(printf %q "$value") does not name it: $out"
    [ "$(wc -l <<<"$out")" -eq 1 ] || fail "the error for BATON_STEP_HET_COMPONENTS=$(printf %q "$value") spans lines: $out"
  done
  rm -f "$EMPTY_CONF"
}

test_errors_are_labelled_by_the_command_not_the_plugin() {
  # Before: "baton env: baton[spank] NotFound: ...", the plugin's label.
  local out rc=0
  local -a libs=()
  [ -z "$BATON_LIBS" ] || libs=("LD_LIBRARY_PATH=$BATON_LIBS")
  out=$(timeout 10 env -i "PATH=$PATH" "${libs[@]}" "$BATON" env 2>&1) || rc=$?
  echo "$out"
  expect_eq "$rc" 1 "exit status outside a job"
  grep -qE '^baton env: NotFound( \([^)]*\))?: SLURM_JOB_ID is not set' <<<"$out" || fail "not labelled 'baton env: NotFound': $out"
  ! grep -qF 'baton[spank]' <<<"$out" || fail "labelled as the plugin: $out"
  rc=0
  out=$(timeout 10 env -i "PATH=$PATH" "${libs[@]}" "$BATON" hostfile --format=xml 2>&1) || rc=$?
  echo "$out"
  expect_eq "$rc" 2 "exit status for a bad --format"
  grep -qE "^baton hostfile: InvalidArgument( \([^)]*\))?: --format: invalid value 'xml'" <<<"$out" || fail "not named as --format: $out"
}

test_baton_env_in_a_task_bound_to_one_gpu_agrees_with_the_plugin() {
  # --gres=gpu:2 -n2 --baton-gpu-bind=local-rank: the plugin left local
  # rank 1 with GPU 1 alone (SLURM_GPUS_ON_NODE=2). Before, baton env
  # exited 1: "2 tasks on n1 but Slurm gave the step 1 GPUs there".
  EMPTY_CONF=$(mktemp)
  local out
  out=$(run_with CUDA_VISIBLE_DEVICES 1 env SLURM_GPUS_ON_NODE=2 BATON_GPU_BIND=local-rank "$BATON" env) ||
    fail "baton env failed: $out"
  echo "$out"
  grep -qx "export CUDA_VISIBLE_DEVICES='1'" <<<"$out" || fail "CUDA_VISIBLE_DEVICES"
  grep -qx "export BATON_DEVICE='0'" <<<"$out" || fail "BATON_DEVICE"
  # --gpus-per-task=1 without baton's binding: the task's own GPU.
  out=$(run_with CUDA_VISIBLE_DEVICES 1 env SLURM_GPUS_ON_NODE=2 "$BATON" env) || fail "baton env failed: $out"
  grep -qx "export BATON_DEVICE='0'" <<<"$out" || fail "BATON_DEVICE without binding: $out"
  rm -f "$EMPTY_CONF"
}
