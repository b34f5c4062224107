# shellcheck shell=bash
# Shell cases: on_timeout kExit ends the process with 75 (run by
# tests/mpi/health-exit.sh through tests/lib/run-cases).

PROG=${BATON_BUILD_DIR:?}/tests/mpi/baton_health_prog
# The deadline of every step (BATON_COLLECTIVE_TIMEOUT, MPI_Init's too):
# 2 s; 10 s under the sanitizers, where MPI_Init alone took more than 2 s on
# a loaded 2-core machine (an ASan build, load 9) and the process rightly
# exited 75 before reaching the step under test.
T=2
[ -z "${BATON_SANITIZE:-}" ] || T=10
LIMIT=$((T + 28))

test_rank_that_times_out_exits_75() {
  local out rc=0 t0=$SECONDS
  out=$(mktemp)
  BATON_COLLECTIVE_TIMEOUT=$T "$REPO/tests/lib/mpirun-ranks" 3 "$PROG" timeout >"$out" 2>&1 || rc=$?
  cat "$out"
  expect_eq "$rc" 75 "exit code of mpirun"
  grep -q "all_reduce of 4 bytes (f32 sum) at step 3 timed out after $T s; ranks not answering heartbeats: none; exiting with 75" "$out" ||
    fail "no timeout line naming the all_reduce, its size, the step and the deadline"
  ! grep -q '^unexpected' "$out" || fail "a collective returned instead of exiting"
  [ $((SECONDS - t0)) -lt $LIMIT ] || fail "took $((SECONDS - t0)) s for a $T s deadline"
  rm -f "$out"
}

# The refusal comes before MPI_Init. Its words are checked on a process
# started alone: under mpirun, a rank that exits non-zero before MPI_Init
# makes mpirun abort the job, and Open MPI 4.1 may end before it forwards
# what the ranks printed (CI, once: "Exit code: 1" and no rank's line).
# Under mpirun the test asks what mpirun does report: every rank's refusal.
test_bad_collective_timeout_is_refused() {
  local out rc=0
  out=$(BATON_COLLECTIVE_TIMEOUT=soon "$PROG" timeout 2>&1) || rc=$?
  echo "$out"
  [ "$rc" -eq 1 ] || fail "exit $rc with BATON_COLLECTIVE_TIMEOUT=soon, alone (want 1: refused)"
  echo "$out" | grep -q "BATON_COLLECTIVE_TIMEOUT='soon' is not a positive number" || fail "the bad value is not named"
  ! echo "$out" | grep -q "first run" || fail "the program went on past the refusal"
  rc=0
  out=$(BATON_COLLECTIVE_TIMEOUT=soon timeout -k 10 60 "$REPO/tests/lib/mpirun-ranks" 2 "$PROG" timeout 2>&1) || rc=$?
  echo "$out"
  [ "$rc" -ne 0 ] || fail "exit 0 with BATON_COLLECTIVE_TIMEOUT=soon under mpirun"
  [ "$rc" -ne 124 ] || fail "mpirun still waiting after 60 s: a rank did not refuse"
  ! echo "$out" | grep -q "first run" || fail "a rank went on past the refusal under mpirun"
}

# The agreed stop under kExit waits in MPI while the runtime's watchdog
# keeps the deadline: a rank that never comes makes the others exit 75.
test_stop_agreement_past_its_deadline_exits_75() {
  local out rc=0 t0=$SECONDS
  out=$(mktemp)
  BATON_COLLECTIVE_TIMEOUT=$T timeout -k 10 50 "$REPO/tests/lib/mpirun-ranks" 3 "$PROG" stop-timeout >"$out" 2>&1 || rc=$?
  cat "$out"
  expect_eq "$rc" 75 "exit code of mpirun"
  grep -q "agreeing whether to stop (all_reduce of 4 bytes on the runtime's communicator) at step 0 timed out after $T s" "$out" ||
    fail "no timeout line naming the agreement"
  [ $((SECONDS - t0)) -lt $LIMIT ] || fail "took $((SECONDS - t0)) s for a $T s deadline"
  rm -f "$out"
}

# A rank stopped while the others are in a Checkpointer::Save: the save's
# agreements have no per-call deadline (a slow disk is not a failure), but a
# rank silent in heartbeats for the deadline ends the others' wait with 75
# (found by the fault campaign, seed 1105: a SIGSTOP at a checkpoint step
# held the job for 120 s until it was cancelled).
test_a_rank_stopped_during_a_save_makes_the_others_exit_75() {
  local out rc=0 t0=$SECONDS dir
  out=$(mktemp)
  dir=$(mktemp -d)
  BATON_COLLECTIVE_TIMEOUT=$T BATON_HEARTBEAT_INTERVAL=0.5 timeout -k 10 60 "$REPO/tests/lib/mpirun-ranks" 3 "$PROG" \
    ckpt-stuck "$dir/ck" >"$out" 2>&1 || rc=$?
  cat "$out"
  expect_eq "$rc" 75 "exit code of mpirun"
  expect_eq "$(grep -c 'saved step 1' "$out")" 3 "ranks that saved step 1"
  grep -q "Checkpointer::Save waiting for ranks that stopped answering heartbeats at step 2 timed out after $T s; ranks not answering heartbeats: 2 (" "$out" ||
    fail "no timeout line naming the call, the step, the deadline and the stopped rank"
  ! grep -q 'unexpected: Save(2) returned' "$out" || fail "Save returned instead of exiting"
  [ $((SECONDS - t0)) -lt $((LIMIT + 10)) ] || fail "took $((SECONDS - t0)) s for a $T s deadline"
  rm -rf "$out" "$dir"
}

# Deadlines in setup and teardown (issue 14, item 9). The last rank never
# comes (it sleeps 60 s; mpirun ends it once another rank exits non-zero).
# run3 ARGS...: 3 ranks, $T s deadline, output in $out, exit code in $rc.
run3() {
  out=$(mktemp)
  rc=0
  t0=$SECONDS
  BATON_COLLECTIVE_TIMEOUT=$T timeout -k 10 50 "$REPO/tests/lib/mpirun-ranks" 3 "$PROG" "$@" >"$out" 2>&1 || rc=$?
  took=$((SECONDS - t0))
  cat "$out"
}

test_runtime_create_past_its_deadline_exits_75() {
  run3 create-timeout
  expect_eq "$rc" 75 "exit code of mpirun"
  grep -q "Runtime::Create: MPI_Comm_dup of MPI_COMM_WORLD timed out after $T s" "$out" || fail "no timeout naming the step"
  [ "$took" -lt $LIMIT ] || fail "took $took s for a $T s deadline"
}

test_runtime_create_past_its_deadline_returns_the_timeout() {
  run3 create-timeout return
  expect_eq "$rc" 75 "exit code of mpirun"
  grep -q "Runtime::Create: baton\[runtime\] Timeout.*Runtime::Create: MPI_Comm_dup of MPI_COMM_WORLD timed out after $T s" "$out" ||
    fail "Create did not return the Timeout naming the step"
  [ "$took" -lt $LIMIT ] || fail "took $took s for a $T s deadline (MPI_Finalize waiting for the missing rank?)"
}

test_communicator_creation_past_its_deadline_exits_75() {
  run3 comm-timeout
  expect_eq "$rc" 75 "exit code of mpirun"
  grep -q "creating the communicator: MPI_Comm_dup of the world timed out after $T s" "$out" || fail "no timeout naming the step"
  [ "$took" -lt $LIMIT ] || fail "took $took s for a $T s deadline"
}

test_communicator_creation_past_its_deadline_returns_the_timeout() {
  run3 comm-timeout return
  expect_eq "$rc" 75 "exit code of mpirun"
  grep -q "CreateCommunicator: baton\[runtime\] Timeout.*creating the communicator: MPI_Comm_dup of the world timed out" "$out" ||
    fail "CreateCommunicator did not return the Timeout"
  grep -q "MPI_Finalize skipped" "$out" || fail "~Runtime did not say it skipped MPI_Finalize"
  [ "$took" -lt $LIMIT ] || fail "took $took s for a $T s deadline (MPI_Finalize waiting for the missing rank?)"
}

# kReturn: the program gets the Timeout and returns; MPI_Finalize would
# wait for the rank that never came, for ever.
test_finalize_after_a_returned_timeout_does_not_wait_for_the_missing_rank() {
  run3 return-timeout
  expect_eq "$rc" 75 "exit code of mpirun"
  grep -q "all_reduce of 4 bytes (f32 sum) timed out after $T s" "$out" || fail "no Timeout returned"
  [ "$took" -lt $LIMIT ] || fail "took $took s for a $T s deadline"
}
