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
  # Every daemon of this cluster names its config on its command line.
  pids=$(pgrep -f "$dir/slurm.conf" || true)
  [ -n "$pids" ] || fail "no daemons found for $dir"
  kill -9 $pids
  sleep 1
  eval "$(cluster start)"
  all_idle || fail "not all nodes idle: $(sinfo -h -N -o '%N %t')"
  srun -N4 -n8 --mpi=pmix true
}
