# Helpers for the cluster suites (bash). Sourced by tests/cluster/run-all
# after tests/lib/suite.sh; the cluster is running and SLURM_CONF is set.

. "$REPO/tests/lib/cases.sh"

# job_field JOBID FIELD: one field of `scontrol show job` (e.g. JobState, Restarts).
job_field() {
  scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND until it succeeds.
wait_for() {
  local limit=$1 what=$2 t0=$SECONDS
  shift 2
  until "$@"; do
    [ $((SECONDS - t0)) -lt "$limit" ] || fail "timed out after ${limit}s waiting for $what"
    sleep 1
  done
  echo "waited $((SECONDS - t0))s for $what"
}

job_state_is() { [ "$(job_field "$1" JobState)" = "$2" ]; }
node_state_is() { [ "$(sinfo -h -N -n "$1" -o %t | head -n 1)" = "$2" ]; }

# A scratch directory for one test, visible to every node (one machine).
case_dir() {
  local d
  d=$(mktemp -d "${BATON_TEST_RESULTS}/case.XXXXXX")
  chmod 755 "$d"
  echo "$d"
}

# run_mpi_suite LABEL TIMEOUT COMMAND...: run_suite for an MPI launch, tried
# up to three times when the launch itself failed: Open MPI 4.1.4 crashes
# now and then inside MPI_Init on this one-machine cluster (a segfault in
# its TCP transport, ~5% of 8-rank launches; docs/testing.md). A failure
# after any rank reported a test result is never retried.
run_mpi_suite() {
  local label=$1 attempt rc
  for attempt in 1 2 3; do
    rc=0
    run_suite "$@" || rc=$?
    [ "$rc" -eq 0 ] && return 0
    if ls "$BATON_TEST_RESULTS/$label".rank*.tsv >/dev/null 2>&1; then
      return "$rc"
    fi
    echo "suite $label: the launch failed before any rank reported (attempt $attempt of 3)" >&2
    printf 'RETRY\t%s\t%s\t%s\n' "$label" "$attempt" "launch failed with exit $rc before any test ran" \
      >> "$BATON_TEST_RESULTS/retries.log"
  done
  return "$rc"
}
