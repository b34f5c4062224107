# shellcheck shell=bash
# The main job over UCX (issue 31 item 11): Open MPI picks `pml ucx` on
# InfiniBand clusters, and here (no InfiniBand) ob1 unless forced. Forced
# through the job's environment (sbatch passes it on to srun and the ranks),
# UCX over tcp and shared memory: examples/train.sbatch with one spare node,
# a node of the step killed, the step launched again inside the allocation.
# Checks that every rank of every launch selected ucx and reached its peers
# through UCX's tcp transport on its node's eth0, the resumed step
# against `baton ckpt ls --json`, no requeue, the job's exit status, and the
# final checksum against the uninterrupted run under mpirun on the host
# (ob1: the sums do not depend on the transport).

# The data set and references of tests/cluster/test_train.sh (same STEPS and
# OPTS): when that suite ran first, its reference is reused.
WORK=$BATON_TEST_RESULTS/cluster-train
mkdir -p "$WORK"
chmod 755 "$WORK"
STEPS=100
OPTS=(--ckpt-every 10 --hidden 256 --ckpt-mode async --progress 0)
STEP_MS=60

. "$REPO/tests/cluster/train-lib.sh"

# ucx_selected OUT L: the number of ranks of launch L that said Open MPI's
# pml framework selected ucx (OMPI_MCA_pml_base_verbose=10).
ucx_selected() { launch_out "$1" "$2" | grep -c 'select: component ucx selected' || true; }
# ucx_over_eth0 OUT L: the number of ranks (nodes) of launch L whose UCX
# endpoints to other nodes use tcp on eth0 (UCX_LOG_LEVEL=info prints each
# endpoint configuration: "ep_cfg[N]: tag(tcp/eth0)"). UCX logs to stdout,
# buffered: a rank killed loses them, so only a launch that ended is read.
ucx_over_eth0() {
  launch_out "$1" "$2" | sed -n 's/^\[[0-9.]*\] \[\(n[0-9]*\):.*ep_cfg\[[0-9]*\]: tag(tcp\/eth0)$/\1/p' | sort -u | wc -l
}

test_node_failure_over_ucx_restarts_the_step_in_the_allocation() {
  begin_case
  local d job node l k t0=$SECONDS STEP_RESTARTS=1 STEP_NODES=3
  d=$(case_dir)
  reference "$STEPS" >/dev/null
  t0=$SECONDS
  # The ranks get these (train.sbatch exports everything to srun); the
  # reference above ran without them.
  export OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any OMPI_MCA_pml_base_verbose=10 \
    UCX_LOG_LEVEL=info
  submit "$d" "$STEPS" -N4
  job=$JOB
  wait_for 120 "the first committed version" has_committed "$d"
  wait_step "$d/out" 20
  node=$(rank_node "$job" 1)
  inalloc_fault "$job" "$d" 1 kill_node "$node"
  l=$(launches "$d/out")
  [ "$(scontrol show hostnames "$(launch_nodes "$d/out" "$l")" | grep -cx "$node")" = 0 ] || fail "the step ran on the dead $node again"
  wait_for 120 "job $job to complete" job_state_is "$job" COMPLETED
  revive_node "$node"
  cat "$d/out"
  for k in $(seq 1 "$l"); do
    # A launch that died in MPI_Init (docs/testing.md) prints fewer.
    launch_out "$d/out" "$k" | grep -E '^(resumed from step|no checkpoint in) ' >/dev/null || continue
    expect_eq "$(ucx_selected "$d/out" "$k")" 3 "ranks of launch $k that selected pml ucx"
  done
  expect_eq "$(ucx_over_eth0 "$d/out" "$l")" 3 "ranks of launch $l with UCX endpoints over tcp/eth0"
  # When UCX notices the dead node before Slurm ends the step, a
  # collective or the heartbeat's MPI_Test returns "Endpoint timeout". No
  # MPI call may follow (mpi_runtime/mpi_check.h): before that rule a later
  # MPI_Test, MPI_Comm_free or MPI_Finalize crashed inside UCX (SIGSEGV, 2
  # of 5 runs). A task of the surviving nodes that dies of a signal fails
  # the case; the tasks of the killed node die of SIGKILL (Killed) and
  # are not counted.
  if grep -q 'Endpoint timeout' "$d/out"; then
    echo "UCX saw the dead node first (Endpoint timeout); MPI left alone afterwards"
  fi
  # (srun: "task 2: Segmentation fault (core dumped)"; UCX's handler:
  # "Caught signal 11"; a bare "Aborted" could be a Status code.)
  ! grep -E 'Caught signal|Segmentation fault|Bus error|core dumped|task [0-9]+: (Aborted|Illegal instruction|Floating point exception)' "$d/out" ||
    fail "a task died of a signal (lines above)"
  ! grep -q 'select: component ob1 selected' "$d/out" || fail "a rank selected ob1"
  expect_eq "$(job_field "$job" Restarts)" 0 "Restarts of job $job (the step ran again in the allocation)"
  expect_eq "$(job_field "$job" ExitCode)" 0:0 "exit code of job $job"
  expect_eq "$(launch_out "$d/out" "$l" | grep -c '^final_checksum=')" 3 "checksum lines of the last launch"
  expect_eq "$(sed -n 's/^final_checksum=//p' "$d/out" | sort -u)" "$(reference "$STEPS")" "final checksum over UCX"
  echo "over UCX: $(awk '{ printf "%.2f", $2 - $1 }' "$d/inalloc.1") s from the fault to the first resumed step;" \
    "$((SECONDS - t0)) s from the submit to the job's end"
}
