# shellcheck shell=bash
# shellcheck disable=SC2016  # single-quoted commands and Python programs run in another shell (srun's) or language
# PyTorch on the local cluster, with only what baton's plugin gives a task:
# torch.distributed's env:// rendezvous across nodes (gloo), and
# examples/train_ddp.py, baton's Python package under DDP, through a node
# failure. Sourced by run-all. Without torch (torch 2 from PyPI in
# /opt/baton-venv, scripts/install-deps --with-torch) every case says SKIP.

# The interpreter configure built baton's Python for (its summary says which):
# by default the virtual environment with torch 2 and Debian's numpy/mpi4py.
PY=${BATON_PYTHON:-/opt/baton-venv/bin/python}

# need_torch: SKIP (exit 77) when $PY cannot import torch.
need_torch() {
  local why
  why=$("$PY" -c 'import torch' 2>&1 | tail -n 1) && return 0
  echo "SKIP: torch does not import in $PY (${why:-no message}); scripts/install-deps --with-torch installs torch 2 from PyPI"
  exit 77
}

# Three ranks on three nodes meet through init_process_group("gloo") with
# env:// (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE from the plugin) and sum
# their ranks. gloo advertises the address its host name resolves to: with
# names that resolve nowhere it was 127.0.0.1, and rank 0 on n1 connected to
# itself at n2's port ("connect [127.0.0.1]:PORT: Connection refused").
# GLOO_SOCKET_IFNAME is unset on purpose: no interface is named for it.
test_gloo_rendezvous_across_three_nodes_with_the_plugins_variables() {
  need_torch
  local out
  out=$(env -u GLOO_SOCKET_IFNAME -u TP_SOCKET_IFNAME timeout 180 \
    srun -N3 -n3 --ntasks-per-node=1 --baton "$PY" -c '
import datetime, os, socket
import torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print("rank", dist.get_rank(), "of", dist.get_world_size(), "on", socket.gethostname(),
      "master", os.environ["MASTER_ADDR"], "sum", int(t.item()), flush=True)
dist.destroy_process_group()
' 2>&1) || { echo "$out"; fail "the gloo rendezvous failed"; }
  echo "$out"
  expect_eq "$(grep -c '^rank [0-2] of 3 on n[1-4] master .* sum 6$' <<<"$out")" 3 "ranks that summed 1+2+3 = 6"
  expect_eq "$(grep -o ' on n[1-4] ' <<<"$out" | sort -u | wc -l)" 3 "distinct nodes of the three ranks"
  ! grep -q 'Connection refused\|127\.0\.0\.1' <<<"$out" || fail "a rank connected to or advertised 127.0.0.1"
}

# --- examples/train_ddp.py through a node failure ----------------------------
# The harness of baton-train's node-failure scenario (train-lib.sh) with the
# DDP example's job script: the same output lines ("[train_ddp.sbatch ...]
# start on", "resumed from step N (restart R)", "step=N", "final_checksum=")
# and the same checks (check_job).

WORK=$BATON_TEST_RESULTS/cluster-torch
mkdir -p "$WORK"
chmod 755 "$WORK"
SCRIPT_NAME=train_ddp.sbatch
RANK_PROG=${PY##*/}  # the process name of the ranks (pgrep -x): "python" for the venv's
. "$REPO/tests/cluster/train-lib.sh"
DDP_PY=$REPO/examples/train_ddp.py
SCRIPT=$REPO/examples/train_ddp.sbatch
# Small and short: 60 steps of a 64-wide MLP, saved every 10 (synchronously:
# a "checkpoint step=N" line means committed). The job's steps sleep 100 ms so
# that the fault meets a run in progress; the reference needs no sleep.
DDP_STEPS=60
DDP_OPTS=(--ckpt-every 10 --hidden 64)
DDP_STEP_MS=100
# baton's Python package in the build tree (make builds it there); an
# installed one needs no PYTHONPATH.
BATON_PY_DIR=$BATON_BUILD_DIR/python

# need_baton_python: SKIP when the build has no Python package (configure
# found no pybind11 or Python headers); FAIL when it has one that does not
# import.
need_baton_python() {
  local why
  if ! compgen -G "$BATON_PY_DIR/baton/_baton*.so" >/dev/null; then
    echo "SKIP: the build has no baton Python extension in $BATON_PY_DIR/baton (configure's summary says why)"
    exit 77
  fi
  why=$(PYTHONPATH=$BATON_PY_DIR "$PY" -c 'import baton' 2>&1) ||
    fail "baton's Python package in $BATON_PY_DIR does not import: $why"
}

# reference STEPS [RANKS]: the uninterrupted run's checksum, one srun step
# of RANKS ranks on as many nodes (the sum order depends on the world size,
# not on the nodes).
reference() {
  local n=$1 ranks=${2:-3} f=$WORK/ddp-reference-$1-np${2:-3}
  if [ ! -s "$f" ]; then
    rm -rf "$f.ckpt"
    PYTHONPATH=$BATON_PY_DIR BATON_CKPT_DIR=$f.ckpt timeout 300 \
      srun -N"$ranks" -n"$ranks" --ntasks-per-node=1 --baton --mpi=pmix -K \
      "$PY" "$DDP_PY" --steps "$n" "${DDP_OPTS[@]}" >"$f.out" 2>&1 || { cat "$f.out"; fail "the reference run failed"; }
    sed -n 's/^final_checksum=//p' "$f.out" | sort -u >"$f"
    [ "$(wc -l <"$f")" = 1 ] || { cat "$f.out"; fail "the reference's ranks disagree or printed no checksum"; }
  fi
  cat "$f"
}

# submit DIR STEPS [SBATCH OPTIONS...]: sets JOB.
submit() {
  local d=$1 steps=$2 job
  shift 2
  job=$(PYTHON=$PY TRAIN_DDP=$DDP_PY PYTHONPATH=$BATON_PY_DIR BATON_CKPT_DIR=$(ckpt_dir "$d") \
    BATON_COLLECTIVE_TIMEOUT=10 BATON_CLI=$BATON_BUILD_DIR/cli/baton \
    sbatch --parsable -N3 --ntasks-per-node=1 -o "$d/out" "$@" "$SCRIPT" \
    --steps "$steps" --step-ms "$DDP_STEP_MS" "${DDP_OPTS[@]}") || return 1
  CASE_JOBS="$CASE_JOBS $job"
  JOB=$job
  echo "submitted job $job"
}

# Two faults in one job, as in baton-train's scenarios. First `scontrol
# requeue`: Slurm's SIGTERM reaches every rank, they agree on a step
# (rt.should_stop()), save it and exit 75 (KillWait bounds the save: a stop
# that made it lost nothing). Then, in the requeued run, a node of the job is
# killed after a committed checkpoint: Slurm requeues the job, the next run
# (on the three nodes left) resumes from the newest committed version. After
# each fault the run resumes from the newest committed version, and the
# weights end bit for bit as the uninterrupted run's, which runs while the
# job waits for its second requeue.
test_ddp_example_through_an_agreed_stop_and_a_node_failure_ends_bit_identical() {
  need_torch
  need_baton_python
  begin_case
  local d job node run nodes ref_pid
  d=$(case_dir)
  submit "$d" "$DDP_STEPS"
  job=$JOB
  wait_step "$d/out" 12
  before_fault "$job" "$d" 1
  scontrol requeue "$job"
  after_fault "$job" "$d" 1
  wait_for 60 "the requeued run to start" runs_at_least "$d/out" 2
  wait_step "$d/out" $(($(cut -d' ' -f3 "$d/fault.1") + 15))
  node=$(rank_node "$job" 1)
  before_fault "$job" "$d" 2
  kill_node "$node"
  reference "$DDP_STEPS" >/dev/null &
  ref_pid=$!
  after_fault "$job" "$d" 2
  run=$(($(runs "$d/out") + 1))
  wait_for 60 "the next run to start" runs_at_least "$d/out" "$run"
  revive_node "$node"
  wait "$ref_pid" || fail "the reference run failed"
  check_job "$job" "$d" 2 "$DDP_STEPS"
  if run_out "$d/out" "$(cut -d' ' -f2 "$d/fault.1")" | grep '^stop agreed' >/dev/null; then
    check_stop_lost_nothing "$d" 1
  else
    echo "the first fault's run was killed before its agreed stop was saved (KillWait)"
  fi
  nodes=$(run_out "$d/out" "$run" | sed -n 's/.*start on \([^ ]*\) at .*/\1/p')
  echo "killed $node; the next run ran on $nodes"
  [ "$(scontrol show hostnames "$nodes" | grep -cx "$node")" = 0 ] || fail "the job ran on $node again"
}
