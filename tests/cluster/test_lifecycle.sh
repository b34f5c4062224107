# shellcheck shell=bash
# Stopping and starting the local cluster, also after its daemons were
# killed from outside (as CI finds the machine). Leaves the cluster running.

cluster() { "$REPO/scripts/local-cluster" "$@"; }

all_idle() { [ "$(sinfo -h -N -o '%N %t' | sort -u | tr '\n' ' ')" = "n1 idle n2 idle n3 idle n4 idle " ]; }

test_stop_and_start_twice_in_a_row() {
  local i rc
  for i in 1 2; do
    cluster stop
    rc=0; cluster status || rc=$?
    expect_eq "$rc" 3 "status exit code after stop $i"
    eval "$(cluster start)"
    all_idle || fail "not all nodes idle after start $i: $(sinfo -h -N -o '%N %t')"
    srun -N4 -n4 true
  done
}

test_start_after_daemons_were_killed_from_outside() {
  local dir pids
  dir=$(dirname "$SLURM_CONF")
  # Every Slurm daemon of this cluster has its config as one argument of its command line
  # (exactly that argument: no pattern that could match another cluster's processes), and
  # munged its socket.
  pids=$(grep -lszxF -e "$dir/slurm.conf" -e "--socket=$dir/munge/socket" /proc/[0-9]*/cmdline |
    sed -n 's|^/proc/\([0-9]*\)/cmdline$|\1|p' || true)
  [ -n "$pids" ] || fail "no daemons found for $dir"
  # shellcheck disable=SC2086  # one argument per pid
  kill -9 $pids
  sleep 1
  eval "$(cluster start)"
  all_idle || fail "not all nodes idle: $(sinfo -h -N -o '%N %t')"
  srun -N4 -n8 --mpi=pmix true
}

# A second cluster (its own directory and port base) starts, runs an MPI step and stops beside
# this one, which keeps running untouched: same daemons, munge works, a step still runs.
test_a_second_cluster_runs_beside_this_one_and_stops_without_touching_it() {
  local before after other base out
  before=$(cluster status 2>&1) || fail "status before: $before"
  other=$(case_dir)/other
  base=$((BATON_CLUSTER_PORT_BASE + 100))
  (
    eval "$(BATON_CLUSTER_DIR=$other BATON_CLUSTER_PORT_BASE=$base cluster start --nodes 2)"
    trap 'cluster stop >/dev/null 2>&1 || true' EXIT
    out=$(srun -N2 -n4 --mpi=pmix "$BATON_BUILD_DIR/examples/hello_allreduce" 2>&1) || fail "step on the second cluster: $out"
    grep -c '(correct)' <<<"$out" | grep -qx 4 || fail "second cluster: $out"
    sinfo -h -N -o '%N %o' | sort -u
    cluster stop
    trap - EXIT
  )
  after=$(cluster status 2>&1) || fail "status after the other cluster stopped: $after"
  expect_eq "$(echo "$after" | grep -oE 'pid [0-9]+' | sort)" \
            "$(echo "$before" | grep -oE 'pid [0-9]+' | sort)" "this cluster's daemon pids"
  srun -N4 -n8 --mpi=pmix "$BATON_BUILD_DIR/examples/hello_allreduce" >/dev/null ||
    fail "a step on this cluster after the other stopped"
  [ ! -e "/run/netns/bt$base-n1" ] || fail "the other cluster left its namespace bt$base-n1"
  ! ip link show "bt$base" >/dev/null 2>&1 || fail "the other cluster left its bridge bt$base"
}

# Ten stop/start cycles in a row, each followed by an 8-rank MPI step: a start never fails.
test_ten_stop_start_cycles_each_with_a_step() {
  local i t0
  for i in $(seq 1 10); do
    cluster stop >/dev/null 2>&1 || fail "stop $i"
    t0=$SECONDS
    eval "$(cluster start 2>/dev/null)" || fail "start $i"
    echo "cycle $i: up in $((SECONDS - t0)) s"
    all_idle || fail "not all nodes idle after start $i: $(sinfo -h -N -o '%N %t')"
    srun -N4 -n8 --mpi=pmix "$BATON_BUILD_DIR/examples/hello_allreduce" >/dev/null || fail "step after start $i"
  done
}

# A daemon creates its pid file, then writes its pid: a status or start that reads the file in
# between must leave it alone (it used to remove it, and start then waited 30 s for a pid file
# the daemon had already written into the unlinked one).
test_a_pid_file_read_while_empty_is_left_for_its_daemon() {
  local dir
  dir=$(dirname "$SLURM_CONF")
  cluster kill-node n4
  : >"$dir/run/n4.pid" # as slurmd leaves it between creating and writing it
  cluster status >/dev/null 2>&1 || true
  [ -e "$dir/run/n4.pid" ] || fail "status removed n4's empty pid file"
  rm -f "$dir/run/n4.pid"
  cluster revive-node n4
}
