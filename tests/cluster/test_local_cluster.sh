# shellcheck shell=bash
# shellcheck disable=SC2016  # single-quoted commands and awk/perl programs run in another shell (srun's, bash -c) or language, which expands them
# The local Slurm cluster itself (scripts/local-cluster): layout, requeue on
# exit 75, and a node failure with requeue and revival. Sourced by run-all.

test_four_nodes_idle_with_their_own_addresses() {
  local out
  out=$(sinfo -h -N -o '%N %t %o' | sort -u)
  echo "$out"
  expect_eq "$(echo "$out" | awk '{print $1}' | tr '\n' ' ')" "n1 n2 n3 n4 " "node names"
  expect_eq "$(echo "$out" | awk '{print $2}' | sort -u | tr '\n' ' ')" "idle " "node states"
  expect_eq "$(echo "$out" | awk '{print $3}' | sort -u | wc -l)" 4 "distinct node addresses"
}

# node_addr NODE: the address Slurm has for NODE.
node_addr() { sinfo -h -N -n "$1" -o %o | head -n 1; }

test_each_node_has_its_host_name_its_own_address_and_no_way_off_the_machine() {
  local d out node
  d=$(case_dir)
  # Prints: node, host name, eth0's address, the number of interfaces besides lo, and whether
  # a packet to an address off the subnet has a route (asked of the kernel; nothing is sent).
  cat >"$d/probe.sh" <<'SH'
addr=$(ip -o -4 addr show dev eth0 | awk '{ print $4 }')
links=$(ip -o link | grep -vc ' lo:')
route=none; ip route get 192.0.2.123 >/dev/null 2>&1 && route=off-subnet
echo "$SLURMD_NODENAME $(hostname) $addr $links $route"
SH
  out=$(srun -N4 -n4 --ntasks-per-node=1 bash "$d/probe.sh" | sort)
  echo "$out"
  for node in n1 n2 n3 n4; do
    grep -qx "$node $node $(node_addr "$node")/24 1 none" <<<"$out" ||
      fail "$node: expected host name $node, one interface eth0 holding $(node_addr "$node"), no route off the subnet"
  done
}

# Every node resolves every node's name, its own included, to that node's address on the
# cluster's network, as on a real cluster: programs advertise the address their host name
# resolves to (torch's gloo fell back to 127.0.0.1 when nK resolved nowhere, and its peers on
# other nodes then connected to themselves). Both resolver calls: gethostbyname (getent hosts)
# and getaddrinfo (getent ahostsv4), which gloo uses. The host's own /etc/hosts is untouched.
test_every_node_resolves_every_nodes_name_to_its_address() {
  local d out node k want
  d=$(case_dir)
  cat >"$d/resolve.sh" <<'SH'
for name in "$(hostname)" n1 n2 n3 n4; do
  byname=$(getent hosts "$name" | awk '{ print $1 }' | sort -u | tr '\n' ,)
  byaddrinfo=$(getent ahostsv4 "$name" | awk '{ print $1 }' | sort -u | tr '\n' ,)
  echo "$SLURMD_NODENAME $name ${byname:-none} ${byaddrinfo:-none}"
done
SH
  out=$(srun -N4 -n4 --ntasks-per-node=1 bash "$d/resolve.sh" | sort)
  echo "$out"
  for node in n1 n2 n3 n4; do
    for k in 1 2 3 4; do
      want=$(node_addr "n$k")
      grep -qxF "$node n$k $want, $want," <<<"$out" ||
        fail "on $node, n$k does not resolve to exactly $want (its NodeAddr) by both calls"
    done
    want=$(node_addr "$node")
    grep -qxF "$node $node $want, $want," <<<"$out" ||
      fail "on $node, its own host name does not resolve to exactly $want (not 127.0.0.1)"
  done
  ! grep -q 'local-cluster' /etc/hosts || fail "the host's /etc/hosts holds the cluster's lines"
}

# A server on n1 is reached at n1's address from n2, and not at n3's: on a shared network
# stack every address reaches every listener, and a rendezvous at the wrong node's address
# would pass. 127.0.0.1 of one node is not another node's either.
test_traffic_between_nodes_crosses_real_network_stacks() {
  local d port out
  d=$(case_dir)
  port=$((BATON_CLUSTER_PORT_BASE + 250))
  cat >"$d/net.py" <<'PY'
import socket, sys, time
role, port, n1, n3, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
if role == "server":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(8); open(ready, "w").close()
    s.settimeout(30)
    c, _ = s.accept(); c.sendall(b"n1-server\n"); c.close()
else:
    t0 = time.time()
    while not __import__("os").path.exists(ready):
        if time.time() - t0 > 30: sys.exit("no server")
        time.sleep(0.05)
    def attempt(addr):
        try:
            c = socket.create_connection((addr, port), timeout=5)
            return c.recv(64).decode().strip()
        except OSError as e:
            return "failed: " + type(e).__name__
    print("via-n3", attempt(n3))
    print("via-loopback", attempt("127.0.0.1"))
    print("via-n1", attempt(n1))
PY
  out=$(srun -N2 -n2 -w n1,n2 --ntasks-per-node=1 -l bash -c \
    'if [ "$SLURM_PROCID" = 0 ]; then role=server; else role=client; fi
     exec /usr/bin/python3 "$0" "$role" "$@"' "$d/net.py" "$port" "$(node_addr n1)" "$(node_addr n3)" "$d/ready")
  echo "$out"
  grep -q 'via-n1 n1-server' <<<"$out" || fail "n2 did not reach the server on n1 at n1's address"
  grep -q 'via-n3 failed' <<<"$out" || fail "n2 reached n1's server at n3's address"
  grep -q 'via-loopback failed' <<<"$out" || fail "n2 reached n1's server at 127.0.0.1"
}

test_each_node_has_its_own_disk_at_the_same_path() {
  local d out
  d=$(case_dir)
  srun -N1 -n1 -w n1 bash -c 'echo from-n1 >"$BATON_NODE_SCRATCH/f" && echo from-n1 >"$TMPDIR/t"'
  out=$(srun -N4 -n4 --ntasks-per-node=1 -l bash -c \
    'echo "$BATON_NODE_SCRATCH $TMPDIR $(cat "$BATON_NODE_SCRATCH/f" "$TMPDIR/t" 2>/dev/null | tr "\n" " ")"' | sort)
  echo "$out"
  expect_eq "$(awk '{print $2, $3}' <<<"$out" | sort -u | wc -l)" 1 "distinct node-local paths"
  expect_eq "$(grep -c 'from-n1 from-n1' <<<"$out")" 1 "nodes that see n1's files"
  grep -q '^0: .* from-n1 from-n1' <<<"$out" || fail "n1 does not see its own files"
  # The host sees each node's disk under DIR/disk; no node sees another's there.
  expect_eq "$(cat "$BATON_CLUSTER_DIR/disk/n1/scratch/f")" from-n1 "n1's file seen from the host"
  out=$(srun -N1 -n1 -w n2 bash -c "ls -A '$BATON_CLUSTER_DIR/disk' | wc -l")
  expect_eq "$out" 0 "entries of DIR/disk seen from n2"
  # The shared file system is shared.
  srun -N1 -n1 -w n3 bash -c "echo shared >'$d/s'"
  expect_eq "$(srun -N1 -n1 -w n4 cat "$d/s")" shared "a file on the shared file system, read on n4"
}

test_start_twice_is_harmless() {
  local before after
  before=$("$REPO/scripts/local-cluster" status 2>&1) || fail "status before: $before"
  expect_eq "$(echo "$before" | grep -c 'pid [0-9]')" 6 "daemons with a pid (munged, slurmctld, 4 slurmd)"
  "$REPO/scripts/local-cluster" start >/dev/null || fail "second start failed"
  after=$("$REPO/scripts/local-cluster" status 2>&1) || fail "status after: $after"
  # The same daemons (same pids) still run.
  expect_eq "$(echo "$after" | grep -oE 'pid [0-9]+' | sort)" \
            "$(echo "$before" | grep -oE 'pid [0-9]+' | sort)" "daemon pids"
  srun -N4 -n4 true
}

test_batch_job_exiting_75_is_requeued_and_runs_again() {
  local d job
  d=$(case_dir)
  cat > "$d/job.sh" <<'JOB'
#!/bin/bash
echo "run restart_count=${SLURM_RESTART_COUNT:-0}"
[ "${SLURM_RESTART_COUNT:-0}" -ge 1 ] && exit 0
exit 75
JOB
  job=$(sbatch --parsable --requeue --open-mode=append -N1 -o "$d/out" "$d/job.sh")
  wait_for 150 "job $job to complete after its requeue" job_state_is "$job" COMPLETED
  cat "$d/out"
  expect_eq "$(job_field "$job" Restarts)" 1 "Restarts of job $job"
  expect_eq "$(grep -c '^run ' "$d/out")" 2 "runs of job $job"
  grep -q 'run restart_count=1' "$d/out" || fail "second run did not see SLURM_RESTART_COUNT=1"
}

test_node_failure_requeues_job_and_revive_returns_node() {
  local d job
  d=$(case_dir)
  cat > "$d/job.sh" <<'JOB'
#!/bin/bash
echo "run restart_count=${SLURM_RESTART_COUNT:-0} nodes=$SLURM_JOB_NODELIST"
if [ "${SLURM_RESTART_COUNT:-0}" -eq 0 ]; then
  srun sleep 600
else
  srun hostname
fi
JOB
  job=$(sbatch --parsable --requeue --open-mode=append -N4 -o "$d/out" "$d/job.sh")
  wait_for 60 "job $job to run" job_state_is "$job" RUNNING
  wait_for 30 "the job's step to start" grep -q '^run ' "$d/out"
  touch "$BATON_CLUSTER_DIR/disk/n4/scratch/before-the-crash"
  "$REPO/scripts/local-cluster" kill-node n4
  [ ! -e "$BATON_CLUSTER_DIR/disk/n4/scratch/before-the-crash" ] || fail "kill-node left n4's disk as it was"
  node_state_is n4 down || node_state_is n4 'down*' || fail "n4 is not down: $(sinfo -h -N -n n4 -o %t)"
  wait_for 60 "job $job to be requeued" test "$(job_field "$job" Restarts)" = 1
  "$REPO/scripts/local-cluster" revive-node n4
  wait_for 150 "requeued job $job to complete" job_state_is "$job" COMPLETED
  cat "$d/out"
  expect_eq "$(grep -c '^run ' "$d/out")" 2 "runs of job $job"
  expect_eq "$(grep -cE '^n[1-4]$' "$d/out")" 4 "hosts printed by the second run"
  wait_for 30 "n4 to be idle" node_state_is n4 idle
}

# Preemption as on a production cluster: a job of partition "high" needs the nodes a "local"
# job holds; Slurm sends the local job SIGTERM, requeues it, runs the high job, then runs the
# local job again.
test_a_high_priority_job_preempts_and_requeues_a_running_job() {
  local d job high
  d=$(case_dir)
  cat > "$d/job.sh" <<'JOB'
#!/bin/bash
trap 'echo "SIGTERM restart=${SLURM_RESTART_COUNT:-0}"; exit 75' TERM
echo "run restart_count=${SLURM_RESTART_COUNT:-0}"
[ "${SLURM_RESTART_COUNT:-0}" -ge 1 ] && exit 0
while :; do sleep 0.2; done
JOB
  job=$(sbatch --parsable --requeue --open-mode=append -N4 -o "$d/out" "$d/job.sh")
  wait_for 60 "job $job to run" grep -q '^run restart_count=0' "$d/out"
  high=$(sbatch --parsable -p high -N4 -o "$d/high.out" --wrap 'echo high ran on $(hostname)')
  wait_for 90 "high-priority job $high to complete" job_state_is "$high" COMPLETED
  wait_for 120 "preempted job $job to complete after its requeue" job_state_is "$job" COMPLETED
  cat "$d/out" "$d/high.out"
  grep -q 'DUE TO PREEMPTION' "$d/out" || fail "the job's output does not say it was preempted"
  grep -q '^SIGTERM restart=0' "$d/out" || fail "the preempted job got no SIGTERM"
  expect_eq "$(job_field "$job" Restarts)" 1 "Restarts of the preempted job"
  expect_eq "$(grep -c '^run ' "$d/out")" 2 "runs of the preempted job"
}

# A time limit with --signal=B:USR2@N: the batch shell gets USR2 N seconds (give or take
# slurmctld's check interval) before the limit, exits 75 and is requeued (RequeueExit=75).
test_time_limit_signal_reaches_the_batch_script_before_the_limit() {
  local d job
  d=$(case_dir)
  cat > "$d/job.sh" <<'JOB'
#!/bin/bash
t0=$SECONDS
trap 'echo "USR2 after $((SECONDS - t0)) s restart=${SLURM_RESTART_COUNT:-0}"; exit 75' USR2
echo "run restart_count=${SLURM_RESTART_COUNT:-0}"
[ "${SLURM_RESTART_COUNT:-0}" -ge 1 ] && exit 0
while :; do sleep 0.2; done
JOB
  job=$(sbatch --parsable --requeue --open-mode=append --time=1 --signal=B:USR2@50 -N1 -o "$d/out" "$d/job.sh")
  wait_for 150 "job $job to be signalled, requeued and complete" job_state_is "$job" COMPLETED
  cat "$d/out"
  grep -q '^USR2 after [0-9]* s restart=0' "$d/out" || fail "no USR2 before the time limit"
  local after
  after=$(sed -n 's/^USR2 after \([0-9]*\) s.*/\1/p' "$d/out")
  [ "$after" -lt 60 ] || fail "USR2 came after ${after}s, not before the 60 s limit"
  expect_eq "$(job_field "$job" Restarts)" 1 "Restarts"
  ! grep -q 'DUE TO TIME LIMIT' "$d/out" || fail "the job reached its time limit instead of requeueing"
}

# A cluster case that fails leaves no job for the next case (run_case's
# case_after_failure): its job would share the nodes with the next cases
# and could fail them too.
inner_case_that_fails() {  # run by the case below, through run_case
  sbatch --parsable -N1 -o /dev/null --wrap 'sleep 600' >"$INNER_DIR/job"
  wait_for 30 "the inner job to run" job_state_is "$(cat "$INNER_DIR/job")" RUNNING
  fail "on purpose, with its job running"
}

test_a_failed_case_leaves_no_job_behind() {
  local d row
  d=$(case_dir)
  INNER_DIR=$d BATON_TEST_RESULTS=$d run_case inner inner_case_that_fails 2>"$d/log" || true
  cat "$d/log"
  row=$(cut -f1,3 "$d/inner.tsv")
  expect_eq "$row" "$(printf 'FAIL\tinner_case_that_fails')" "the inner case's row"
  grep -q 'cancelling what the case left' "$d/log" || fail "nothing was cancelled after the failure"
  expect_eq "$(squeue -h -j "$(cat "$d/job")" -o %T 2>/dev/null)" "" "the failed case's job in the queue"
}
