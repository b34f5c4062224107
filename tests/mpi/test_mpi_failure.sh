# shellcheck shell=bash
# Shell cases: after an MPI failure no baton thread calls MPI again (issue
# 31, item 11: under Open MPI with UCX, the heartbeat's next MPI_Test,
# MPI_Comm_free and MPI_Finalize crashed after a peer died). The failure is
# injected on the last of 2 ranks by a PMPI shim (tests/mpi/mpi_failure_shim.cc),
# which writes every MPI call made after it to stderr. Run by
# tests/mpi/mpi-failure.sh through tests/lib/run-cases.

PROG=${BATON_BUILD_DIR:?}/tests/mpi/baton_mpi_failure_prog
# The collective deadline: the failing rank waits it out under kExit, the
# other rank waits for it until then.
T=2
[ -z "${BATON_SANITIZE:-}" ] || T=10
LIMIT=$((T + 25))

# run2 MODE CALL: 2 ranks, heartbeats every 0.05 s (20 ms polls: a
# heartbeat still running after the failure calls MPI within the
# program's last half second); output in $out, exit code in $rc.
run2() {
  out=$(mktemp)
  rc=0
  t0=$SECONDS
  BATON_COLLECTIVE_TIMEOUT=$T BATON_HEARTBEAT_INTERVAL=0.05 timeout -k 10 $LIMIT \
    "$REPO/tests/lib/mpirun-ranks" 2 "$PROG" "$@" >"$out" 2>&1 || rc=$?
  took=$((SECONDS - t0))
  cat "$out"
}

# No MPI call after the failure: the shim names each one.
expect_no_call_after() {
  ! grep -q 'called after the injected failure' "$out" || fail "baton called MPI after the failure (lines above)"
}

test_an_mpi_error_under_exit_waits_out_the_deadline_and_exits_75() {
  run2 exit MPI_Allreduce
  expect_eq "$rc" 75 "exit code of mpirun"
  grep -q 'MPI_Allreduce fails with MPI_ERR_OTHER (injected)' "$out" || fail "the failure was not injected"
  grep -q "MPI_Allreduce failed with error .*exiting with 75 at the call's deadline" "$out" ||
    fail "no line saying the rank waits for the deadline, naming the failed call"
  grep -q 'all_reduce of 4 bytes (f32 sum): .*MPI_Allreduce failed.*exiting with 75 (requeue me)' "$out" ||
    fail "no exit-75 line naming the collective and the MPI error"
  ! grep -q '^rank 1: all_reduce' "$out" || fail "the collective returned under kExit"
  expect_no_call_after
  [ "$took" -ge "$T" ] || fail "exited after $took s: before the $T s deadline"
  [ "$took" -lt $LIMIT ] || fail "took $took s for a $T s deadline"
  rm -f "$out"
}

test_an_mpi_error_under_return_is_returned_and_mpi_left_alone() {
  run2 return MPI_Iallreduce
  grep -q 'MPI_Iallreduce fails with MPI_ERR_OTHER (injected)' "$out" || fail "the failure was not injected"
  grep -q '^rank 1: all_reduce: baton\[runtime\] IOError .*MPI_Iallreduce failed with error' "$out" ||
    fail "the collective did not return the MPI error"
  grep -q '^rank 1: second all_reduce: baton\[runtime\] IOError .*not made .*MPI failed earlier in this process (MPI_Iallreduce failed' "$out" ||
    fail "the next collective did not return at once naming the first failure"
  grep -Eq '^rank 1: second all_reduce: .* after [0-9] ms' "$out" || fail "the next collective did not return at once"
  grep -q '^rank 1: should_stop: true' "$out" || fail "should_stop() did not say stop"
  grep -q '^rank 1: returning; MPI calls after the failure so far: 0' "$out" || fail "MPI called before the teardown"
  grep -q '(rank 1): 0 MPI calls after the injected failure' "$out" ||
    fail "no summary of 0 calls from the shim after the teardown (~Runtime freed or finalized?)"
  expect_no_call_after
  rm -f "$out"
}

# The heartbeat's own MPI_Test fails (the first call UCX failed when a peer
# died): the thread stops, and the program's next collective returns the
# error at once.
test_a_heartbeat_error_stops_every_mpi_call() {
  run2 return MPI_Test
  grep -q 'MPI_Test fails with MPI_ERR_OTHER (injected)' "$out" || fail "the failure was not injected"
  grep -q '^rank 1: armed MPI_Test (injected: yes)' "$out" || fail "the heartbeat did not call MPI_Test within a second"
  grep -q '^rank 1: all_reduce: baton\[runtime\] IOError .*MPI failed earlier in this process (MPI_Test failed' "$out" ||
    fail "the collective did not return the heartbeat's MPI error"
  grep -q '(rank 1): 0 MPI calls after the injected failure' "$out" || fail "no summary of 0 calls from the shim"
  expect_no_call_after
  rm -f "$out"
}

# A save in flight when MPI fails (issue 31's leftover: the checkpointer's
# background writer beside an MPI failure): the writer (held in its
# shard's fsync) makes no MPI call, Wait(5) and WaitOrAbandon(5) return
# the failure at once instead of waiting for the write first (5 s each
# before: a commit that cannot come), and the Checkpointer's destruction
# abandons the writer and frees nothing.
test_a_save_in_flight_when_mpi_fails_is_left_without_mpi() {
  local dir; dir=$(mktemp -d)
  run2 return MPI_Iallreduce "$dir"
  grep -q 'MPI_Iallreduce fails with MPI_ERR_OTHER (injected)' "$out" || fail "the failure was not injected"
  grep -q '^rank 1: writer: writing' "$out" || fail "the background writer was not writing at the failure"
  local call
  for call in wait wait_or_abandon save save_async restore; do
    grep -Eq "^rank 1: $call: baton\[runtime\] IOError .*the asynchronous save of step 1 is not committed: .*MPI failed earlier in this process \(MPI_Iallreduce failed.* after [0-9]{1,3} ms" "$out" ||
      fail "$call did not return the MPI failure at once"
  done
  grep -q '(rank 1): 0 MPI calls after the injected failure' "$out" || fail "no summary of 0 calls from the shim"
  expect_no_call_after
  rm -rf "$out" "$dir"
}
