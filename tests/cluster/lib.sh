# shellcheck shell=bash
# Helpers for the cluster suites (bash). Sourced by tests/cluster/run-all
# after tests/lib/suite.sh; the cluster is running and SLURM_CONF is set.

. "$REPO/tests/lib/cases.sh"

# job_field JOBID FIELD: one field of `scontrol show job` (e.g. JobState, Restarts).
job_field() {
  scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND until it succeeds,
# every 0.2 s: a wait ends on average half a period after its event, and the
# cluster suites wait about 60 times each (cluster-train: 60 waits; at 1 s
# that was about 30 s of nothing a suite). The commands are a grep of a job's
# output, an scontrol query (about 20 ms here) or a `baton ckpt ls` (about
# 0.1 s at load 8): a small share of a core even at 5 a second.
wait_for() {
  local limit=$1 what=$2 t0=$SECONDS
  shift 2
  until "$@"; do
    [ $((SECONDS - t0)) -lt "$limit" ] || fail "timed out after ${limit}s waiting for $what"
    sleep 0.2
  done
  echo "waited $((SECONDS - t0))s for $what"
}

job_state_is() { [ "$(job_field "$1" JobState)" = "$2" ]; }
node_state_is() { [ "$(sinfo -h -N -n "$1" -o %t | head -n 1)" = "$2" ]; }

# A scratch directory for one test on the shared file system, visible to every node.
case_dir() {
  local d
  d=$(mktemp -d "${BATON_TEST_RESULTS}/case.XXXXXX")
  chmod 755 "$d"
  echo "$d"
}


# replace_file FILE: FILE's new content from stdin, put in place by rename,
# so that a reader sees the old file or the new one, never a part. A
# slurm.conf rewritten in place with `>` was read empty or half-written by
# the job epilog of a job ending at that moment: the epilog failed, and
# slurmd drained the node ("Epilog error" on n1).
replace_file() {
  local file=$1 tmp
  tmp=$(mktemp "$(dirname "$file")/.$(basename "$file").XXXXXX") || fail "replace_file: cannot make a temporary file beside $file"
  cat >"$tmp" || fail "replace_file: cannot write $tmp"
  chmod --reference="$file" "$tmp" 2>/dev/null || chmod 644 "$tmp"
  mv -f "$tmp" "$file" || fail "replace_file: cannot rename $tmp to $file"
}

# rpc_count MESSAGE_TYPE [FILE]: how many requests of that type (REQUEST_NODE_INFO, ...) the
# controller served since its statistics were last reset (`sdiag -r`); 0 when none. From
# FILE (sdiag's output, saved where the test could not call this, a batch script) when given.
rpc_count() {
  { if [ $# -gt 1 ]; then cat "$2"; else sdiag; fi; } | awk -v type="$1" '$1 == type { for (i = 2; i <= NF; i++) if ($i ~ /^count:/) { sub(/^count:/, "", $i); n = $i } }
    END { print n + 0 }'
}

# node_addr NODE: the address Slurm has for NODE (NodeAddr; the node name when none is set).
node_addr() { scontrol show node "$1" | tr ' ' '\n' | sed -n 's/^NodeAddr=//p'; }

# for_each_task FILE CHECK: runs `CHECK LINE` once for each task's line of
# tests/cluster/print-task-env output in FILE, with the line's NAME=VALUE
# pairs in the associative array T (T[RANK], T[SLURM_PROCID], ...).
for_each_task() {
  local file=$1 check=$2 line kv
  while read -r line; do
    unset T
    declare -gA T=()
    # shellcheck disable=SC2034 # T is read by CHECK
    for kv in $line; do T[${kv%%=*}]=${kv#*=}; done
    "$check" "$line"
  done < <(grep 'SLURM_PROCID=' "$file")
  unset T
}

# with_plugstack_args "ARGS" COMMAND...: runs COMMAND (a subshell: a failing check exits it,
# never skipping the restore) with spank_baton.so's plugstack.conf arguments set to ARGS, then
# restores the file. Slurm rereads it at every launch and job epilog; both rewrites are
# renames (replace_file).
with_plugstack_args() {
  local conf="$BATON_CLUSTER_DIR/plugstack.conf" args=$1 saved rc=0
  shift
  saved=$(cat "$conf")
  # shellcheck disable=SC2001 # the line of spank_baton.so only, wherever it is
  sed "s|\(spank_baton.so\).*|\1 $args|" <<<"$saved" | replace_file "$conf"
  ("$@") || rc=$?
  printf '%s\n' "$saved" | replace_file "$conf"
  return $rc
}

# What a case that ran past its limit adds to its output (tests/lib/cases.sh):
# what the controller says of the jobs and the nodes, which is nearly always
# why a step waited (a node down or drained, a job left behind).
case_timeout_context() {
  echo "squeue:"; timeout 10 squeue -a -o '%i %j %T %r %N' 2>&1 || true
  echo "sinfo -R:"; timeout 10 sinfo -R 2>&1 || true
  echo "sinfo -N:"; timeout 10 sinfo -N -o '%N %t %E' 2>&1 || true
}

# settle_cluster LABEL: run by run-all after each suite. The suites share one
# cluster, and a suite that leaves a job in the queue or a node down or
# drained makes the next suite's steps wait for ever (a het step pinned to
# n1 waits for n1). Waits up to 120 s for an empty queue and four usable
# nodes (a job completing, a node coming back); if they do not come, LABEL
# gets a failing row that names what it left (the queue, the nodes and why),
# and the cluster is put right (jobs cancelled, nodes resumed or restarted)
# so that the suites after it still test what they test.
settle_cluster() {
  local label=$1 t0=$SECONDS left
  while :; do
    left=$(cluster_unsettled)
    [ -n "$left" ] || return 0
    [ $((SECONDS - t0)) -lt 120 ] || break
    sleep 2
  done
  echo "settle_cluster: after $label, still after 120 s: $left" >&2
  printf 'FAIL\t%s\t%s\t%s\n' "$label" "the cluster left idle after $label" \
    "$(tr '\t\n' '  ' <<<"$left")" >>"$BATON_TEST_RESULTS/$label.tsv"
  put_cluster_right
}

# case_after_failure (run_case's hook): a failed case's jobs are cancelled
# and its nodes put right before the next case, with no row of its own (the
# case already failed). Left running, such a job shares the nodes with the
# next cases (OverSubscribe=FORCE) and fails them too: a time-limit case that
# failed in CI left its job requeueing itself through the next case.
case_after_failure() {
  [ -n "$(cluster_unsettled)" ] || return 0
  echo "after the failure: cancelling what the case left: $(cluster_unsettled | tr '\t\n' '  ')" >&2
  put_cluster_right
}

# put_cluster_right: cancels every job, restarts a node whose slurmd is not
# responding, resumes a down or drained one, and waits up to 60 s for an idle
# cluster (saying so when it is not).
put_cluster_right() {
  local t0 left
  scancel --full --signal=KILL --user=root 2>/dev/null || true
  scancel -u baton-test 2>/dev/null || true
  local node state
  for node in $(sinfo -h -N -o %N | sort -u); do
    state=$(sinfo -h -N -n "$node" -o %t | head -n 1)
    case $state in
      *'*') "$REPO/scripts/local-cluster" kill-node "$node" >&2 || true
            "$REPO/scripts/local-cluster" revive-node "$node" >&2 || true ;;
      down*|drain*|drng*|fail*) scontrol update nodename="$node" state=resume >&2 || true ;;
    esac
  done
  t0=$SECONDS
  while [ -n "$(cluster_unsettled)" ] && [ $((SECONDS - t0)) -lt 60 ]; do sleep 2; done
  left=$(cluster_unsettled)
  [ -z "$left" ] || echo "settle_cluster: the cluster could not be put right: $left" >&2
}

# cluster_unsettled: nothing when the queue is empty and every node idle;
# otherwise the jobs and the nodes that are not, with the controller's reasons.
cluster_unsettled() {
  local jobs nodes
  jobs=$(timeout 10 squeue -h -a -o '%i %j %u %T %r %N' 2>&1) || jobs="squeue failed: $jobs"
  nodes=$(timeout 10 sinfo -h -N -o '%N %t %E' 2>&1 | sort -u | grep -v ' idle ') || true
  [ -z "$jobs$nodes" ] || printf 'jobs: %s; nodes: %s\n' "${jobs:-none}" "${nodes:-all idle}"
}
