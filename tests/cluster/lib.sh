# shellcheck shell=bash
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

# A scratch directory for one test on the shared file system, visible to every node.
case_dir() {
  local d
  d=$(mktemp -d "${BATON_TEST_RESULTS}/case.XXXXXX")
  chmod 755 "$d"
  echo "$d"
}

