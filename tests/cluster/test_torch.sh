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
# DDP example's job script: the same output lines (`baton run`'s "[baton run
# ...] start on", "resumed from step N (restart R)", "step=N",
# "final_checksum=") and the same checks (check_job).

WORK=$BATON_TEST_RESULTS/cluster-torch
mkdir -p "$WORK"
chmod 755 "$WORK"
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

# sbatch_example DIR JOB_SCRIPT [SBATCH OPTIONS...] [-- PROGRAM OPTIONS...]: submits
# one of the examples' job scripts (train_ddp.sbatch, train_fsdp.sbatch,
# train_lightning.sbatch: `baton run`) as a user of the build tree would
# (PYTHON, PYTHONPATH, BATON_CLI; each program beside its script), 3 nodes
# unless told otherwise; STEP_NODES, MIN_NODES and STEP_RESTARTS (default 3)
# become baton run's options (BATON_RUN_OPTS: a spare, going on with fewer). Sets JOB.
sbatch_example() {
  local d=$1 script=$2 sb=() job
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do sb+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  job=$(PYTHON=$PY TRAIN_DDP=$DDP_PY TRAIN_FSDP=$REPO/examples/train_fsdp.py \
    TRAIN_LIGHTNING=$REPO/examples/train_lightning.py \
    PYTHONPATH=$BATON_PY_DIR BATON_CKPT_DIR=$(ckpt_dir "$d") BATON_COLLECTIVE_TIMEOUT=10 \
    BATON_CLI=$BATON_BUILD_DIR/cli/baton BATON_RUN_OPTS="$(run_opts "${STEP_RESTARTS:-3}")" \
    sbatch --parsable -N3 --ntasks-per-node=1 -o "$d/out" "${sb[@]}" "$script" "$@") || return 1
  CASE_JOBS="$CASE_JOBS $job"
  JOB=$job
  echo "submitted job $job: $script $*"
}

# submit DIR STEPS [SBATCH OPTIONS...]: the DDP example; sets JOB.
submit() {
  local d=$1 steps=$2
  shift 2
  sbatch_example "$d" "$SCRIPT" "$@" -- --steps "$steps" --step-ms "$DDP_STEP_MS" "${DDP_OPTS[@]}"
}

# ddp_shrink_reference STEPS R: the final checksum of an uninterrupted run
# with the job's one change of world size: 3 ranks to step R (saved: the
# last step is), then 2 ranks from that version to STEPS, without the
# per-rank dropout streams (dropped with a warning; each process seeds its
# own at start, as a relaunched one does).
ddp_shrink_reference() {
  local n=$1 at=$2 f=$WORK/ddp-shrink-reference-$1-at-$2
  if [ ! -s "$f" ]; then
    rm -rf "$f.ckpt"
    PYTHONPATH=$BATON_PY_DIR BATON_CKPT_DIR=$f.ckpt timeout 300 \
      srun -N3 -n3 --ntasks-per-node=1 --baton --mpi=pmix -K "$PY" "$DDP_PY" --steps "$at" "${DDP_OPTS[@]}" \
      >"$f.out" 2>&1 || { cat "$f.out"; fail "the reference's 3-rank part failed"; }
    PYTHONPATH=$BATON_PY_DIR BATON_CKPT_DIR=$f.ckpt timeout 300 \
      srun -N2 -n2 --ntasks-per-node=1 --baton --mpi=pmix -K "$PY" "$DDP_PY" --steps "$n" "${DDP_OPTS[@]}" \
      >"$f.out2" 2>&1 || { cat "$f.out" "$f.out2"; fail "the reference's 2-rank part failed"; }
    grep -q "^resumed from step $at " "$f.out2" || { cat "$f.out2"; fail "the reference's 2-rank part did not resume from step $at"; }
    # Kept only when whole: a failed reference is computed again next time.
    sed -n 's/^final_checksum=//p' "$f.out2" | sort -u >"$f.tmp"
    [ "$(wc -l <"$f.tmp")" = 1 ] || { cat "$f.out2"; fail "the reference's ranks disagree or printed no checksum"; }
    mv "$f.tmp" "$f"
  fi
  cat "$f"
}

# Two faults in one job under `baton run --min-nodes 2 --max-restarts 3`.
# First `scontrol requeue`, as a preemption: Slurm's SIGTERM reaches every
# rank, they agree on a step (rt.should_stop()), save it and exit 75, and
# baton run exits 75 once: no launch again into the allocation Slurm is
# taking away (the old loop relaunched when the step ended before its trap
# ran). The requeued run resumes from the stop's version bit for bit. Then a
# node of the step is killed: baton run launches the step again inside the
# allocation on the 2 nodes left (a shrink), the documented state (with
# baton.RNGState()) restores without its per-rank part, with a warning
# naming 'rng', and the job completes, ending as the reference that changes
# world size at the same step (ddp_shrink_reference).
test_ddp_example_preempted_then_on_fewer_nodes_ends_as_the_reference() {
  need_torch
  need_baton_python
  begin_case
  local d job node run l r MIN_NODES=2 STEP_RESTARTS=3
  d=$(case_dir)
  submit "$d" "$DDP_STEPS"
  job=$JOB
  wait_step "$d/out" 12
  before_fault "$job" "$d" 1
  run=$(runs "$d/out")
  scontrol requeue "$job"
  after_fault "$job" "$d" 1
  run_out "$d/out" "$run" | grep "^\[$SCRIPT_NAME " || true
  expect_eq "$(run_out "$d/out" "$run" | grep -c "^\[$SCRIPT_NAME .*\] step launch ")" 1 \
    "launches of the preempted run (a relaunch would hold up the allocation Slurm takes)"
  # KillWait (2 s here) may end baton run with the step; if it said how the step ended, it said 75.
  if run_out "$d/out" "$run" | grep -q "^\[$SCRIPT_NAME .*\] step ended with "; then
    run_out "$d/out" "$run" | grep -q "^\[$SCRIPT_NAME .*\] step ended with [0-9]* .*after a stop was asked for (.*): exiting 75 to be requeued" ||
      fail "baton run did not end the preempted run with 75, naming the stop"
  fi
  wait_for 60 "the requeued run to start" runs_at_least "$d/out" 2
  wait_step "$d/out" $(($(cut -d' ' -f3 "$d/fault.1") + 15))
  node=$(rank_node "$job" 1)
  inalloc_fault "$job" "$d" 2 kill_node "$node"
  l=$(launches "$d/out")
  expect_eq "$(scontrol show hostnames "$(launch_nodes "$d/out" "$l")" | wc -l)" 2 "nodes of the launch after the kill"
  r=$(launch_resumed_from "$d/out" "$l")
  launch_out "$d/out" "$l" | grep -q "RuntimeWarning: baton: step $r was saved by 3 ranks and restores at 2: the per-rank state ('rng') is not restored" ||
    fail "no warning naming the per-rank state dropped at 2 ranks"
  ! grep -q 'uncaught\|refused to go on' "$d/out" || fail "the shrink was refused or reported as a bug"
  wait_for 180 "job $job to complete" job_state_is "$job" COMPLETED
  revive_node "$node"
  cat "$d/out"
  expect_eq "$(job_field "$job" Restarts)" 1 "Restarts of job $job (the requeue only)"
  check_resumes "$d" 1
  expect_eq "$(sed -n 's/^final_checksum=//p' "$d/out" | sort -u)" "$(ddp_shrink_reference "$DDP_STEPS" "$r")" \
    "final checksum against 3 ranks to step $r, then 2"
  if run_out "$d/out" "$(cut -d' ' -f2 "$d/fault.1")" | grep '^stop agreed' >/dev/null; then
    check_stop_lost_nothing "$d" 1
  else
    echo "the first fault's run was killed before its agreed stop was saved (KillWait)"
  fi
  check_causes "$d" "$node"
}

# A bug: the last rank raises at step 4 (--inject bug@4). baton's excepthook
# records it as uncaught and ends the job with 1; baton run, with relaunches
# to spare, neither launches it again nor requeues it: the job fails with
# the program's status, and its comment says why.
test_ddp_example_bug_ends_the_job_with_its_status_without_a_relaunch() {
  need_torch
  need_baton_python
  begin_case
  local d job STEP_RESTARTS=3
  d=$(case_dir)
  sbatch_example "$d" "$SCRIPT" -- --steps 8 --step-ms "$DDP_STEP_MS" "${DDP_OPTS[@]}" --inject bug@4
  job=$JOB
  wait_for 120 "job $job to fail" job_state_is "$job" FAILED
  cat "$d/out"
  expect_eq "$(job_field "$job" ExitCode)" 1:0 "exit code of job $job"
  check_one_allocation "$job" "$d/out"
  expect_eq "$(launches "$d/out")" 1 "launches of job $job"
  # What baton run read (the excepthook's record), and the traceback on the job's output
  # through baton run's stderr (issue 47 item 4).
  cat "$(ckpt_dir "$d")/events/$job"-r*.jsonl | grep -q '"what":"uncaught ZeroDivisionError on rank 2 .*--inject bug@4' ||
    fail "the event log has no uncaught record of the bug"
  grep -q "ZeroDivisionError: --inject bug@4: a bug in the training step" "$d/out" || fail "the traceback is not on the job's output"
  grep -q "^\[$SCRIPT_NAME .*\] step ended with .* uncaught exception(s) (a bug or bad input, see above): exiting 1, not relaunched, not requeued" \
    "$d/out" || fail "baton run does not say why it ended the job"
  [[ $(squeue -h -t all -j "$job" -o %k) == "baton run: step ended with "* ]] || fail "the job's comment does not say why"
}

# --- examples/train_fsdp.sbatch and train_lightning.sbatch: a node failure inside the allocation
# The job holds 4 nodes for a step of 3 (--step-nodes 3: one spare). A
# node of the step is killed (kill_node, as above): the step runs again inside
# the allocation (`baton run`, which both scripts exec), same job,
# no requeue; inalloc_fault (train-lib.sh) checks that and that the launch
# resumed from the newest version committed before the step ended. `baton
# report` must name each interruption's cause from the event log.
FSDP_PY=$REPO/examples/train_fsdp.py
LIGHTNING_PY=$REPO/examples/train_lightning.py
# FSDP2: a one-layer transformer 32 wide (about 120 KiB of weights), 50
# steps saved every 5 (synchronously: "checkpoint step=N" means committed).
FSDP_STEPS=50
FSDP_OPTS=(--dim 32 --layers 1 --seq 16 --samples 256 --ckpt-every 5 --lr 1e-2)
# Lightning: 384 samples, 32 a rank and step: 4 steps an epoch at 3 ranks,
# saved at each epoch's end only (no mid-epoch saves: see the case).
LIGHTNING_EPOCHS=8
LIGHTNING_OPTS=(--samples 384 --batch 32 --hidden 32)
LIGHTNING_STEPS_PER_EPOCH=4
EXAMPLE_STEP_MS=150

# One allocation: the job's every line says "job JOB restart 0", and it ran once.
check_one_allocation() {
  local job=$1 out=$2
  expect_eq "$(runs "$out")" 1 "runs of job $job (a requeue would start another)"
  expect_eq "$(grep -c "^\\[$SCRIPT_NAME " "$out")" "$(grep -c "^\\[$SCRIPT_NAME [0-9:]* job $job restart 0\\] " "$out")" \
    "lines of the job script that say 'job $job restart 0'"
  expect_eq "$(job_field "$job" Restarts)" 0 "Restarts of job $job"
}

# check_causes DIR NODE...: `baton report` on the job's directory names each
# node failure (cause "node failure", the lost node), in order, one per NODE
# killed; prints each interruption's phases (the recovery figures).
check_causes() {
  local d=$1 got
  shift
  "$BATON" report "$(ckpt_dir "$d")" || fail "baton report failed"
  "$BATON" report "$(ckpt_dir "$d")" --json >"$d/report.json" || fail "baton report --json failed"
  perl -MJSON::PP -e '
    my $r = decode_json(do { local $/; <STDIN> });
    for my $i (@{ $r->{interruptions} }) {
      printf "interruption: %s (%s): step %s -> %s, %.2f s = detection %.2f + launch %.2f + set-up %.2f + restore %.2f + first step %.2f\n",
        $i->{cause}, $i->{cause_detail} // "", $i->{last_step}, $i->{resumed_step}, $i->{total_seconds},
        $i->{detection_seconds}, $i->{launch_seconds}, $i->{setup_seconds}, $i->{restore_seconds}, $i->{first_step_seconds};
    }' <"$d/report.json"
  got=$(perl -MJSON::PP -e '
    my $r = decode_json(do { local $/; <STDIN> });
    print join(" ", map { join(",", map { $_->{host} } @{ $_->{lost_nodes} // [] }) } grep { $_->{cause} eq "node failure" } @{ $r->{interruptions} })' \
    <"$d/report.json")
  expect_eq "$got" "$*" "the lost nodes of the interruptions baton report calls 'node failure'"
}

launch_resumed_from() { launch_out "$1" "$2" | sed -n 's/^resumed from step \([0-9]*\) .*/\1/p' | head -n 1; }
# launch_saved_past OUT L STEP: launch L committed a version after STEP.
launch_saved_past() {
  [ "$(launch_out "$1" "$2" | sed -n 's/^checkpoint step=\([0-9]*\).*/\1/p' | tail -n 1)" -gt "$3" ] 2>/dev/null
}
# mean_loss OUT FROM TO: the mean of the last computation of each step's loss in FROM..TO.
mean_loss() {
  sed -n 's/^step=\([0-9]*\) loss=\([0-9.e+-]*\) .*/\1 \2/p' "$1" |
    awk -v lo="$2" -v hi="$3" '$1 >= lo && $1 <= hi {l[$1] = $2} END {for (k in l) {s += l[k]; n++} if (n) printf "%.6f", s / n}'
}
# checksum_of FILE: the one final checksum FILE's lines print (every rank the same), else fails.
checksum_of() {
  local c
  c=$(grep -o 'final_checksum=[0-9a-f]\{64\}' "$1" | sed 's/^final_checksum=//' | sort -u)
  if [ -z "$c" ] || [ "$(wc -l <<<"$c")" != 1 ]; then cat "$1"; fail "$1: no final checksum, or ranks that disagree: '$c'"; fi
  echo "$c"
}

# fsdp_reference STEPS R: the final checksum of an uninterrupted run with the
# job's one change of world size: 3 ranks under mpirun to step R (--stop-at:
# saved, exit 75), then 2 ranks from that version to STEPS.
# (Its lines are looked for anywhere in a line, not at its start: mpirun
# forwards each rank's output in the chunks it reads, so rank 0's line can
# follow another rank's unfinished one; srun forwards whole lines.)
fsdp_reference() {
  local n=$1 at=$2 f=$WORK/fsdp-reference-$1-at-$2 rc=0
  if [ ! -s "$f" ]; then
    rm -rf "$f.ckpt" "$f.out"
    PYTHONPATH=$BATON_PY_DIR BATON_COLLECTIVE_TIMEOUT=60 timeout 300 "$REPO/tests/lib/mpirun-ranks" 3 \
      "$PY" "$FSDP_PY" --steps "$n" --stop-at "$at" "${FSDP_OPTS[@]}" --ckpt-dir "$f.ckpt" >"$f.out" 2>&1 || rc=$?
    grep -q "stop agreed at step $at:" "$f.out" || { cat "$f.out"; fail "the reference did not stop at step $at (exit $rc)"; }
    PYTHONPATH=$BATON_PY_DIR BATON_COLLECTIVE_TIMEOUT=60 timeout 300 "$REPO/tests/lib/mpirun-ranks" 2 \
      "$PY" "$FSDP_PY" --steps "$n" "${FSDP_OPTS[@]}" --ckpt-dir "$f.ckpt" >>"$f.out" 2>&1 ||
      { cat "$f.out"; fail "the reference's 2-rank part failed"; }
    grep -q "resumed from step $at (restart 0, 2 ranks)" "$f.out" || { cat "$f.out"; fail "the reference's 2-rank part did not resume step $at"; }
    checksum_of "$f.out" >"$f"
  fi
  cat "$f"
}

# lightning_reference EPOCHS: the final checksum of an uninterrupted 3-rank run (mpirun).
lightning_reference() {
  local f=$WORK/lightning-reference-$1
  if [ ! -s "$f" ]; then
    rm -rf "$f.ckpt"
    PYTHONPATH=$BATON_PY_DIR BATON_COLLECTIVE_TIMEOUT=60 timeout 300 "$REPO/tests/lib/mpirun-ranks" 3 \
      "$PY" "$LIGHTNING_PY" --epochs "$1" "${LIGHTNING_OPTS[@]}" --ckpt-dir "$f.ckpt" >"$f.out" 2>&1 ||
      { cat "$f.out"; fail "the Lightning reference run failed"; }
    checksum_of "$f.out" >"$f"
  fi
  cat "$f"
}

# FSDP2 through two node failures in one allocation of 4 nodes: the first
# takes the spare (3 ranks again), the second leaves 2 nodes and
# --min-nodes 2 lets the step go on with them: the DTensor shards,
# AdamW's moments and the cursor resharded from 3 ranks to 2 at restore.
# Bit for bit: the final weights equal those of an uninterrupted run that
# changes world size at the same step (3 ranks to the step the shrunk launch
# restored, 2 from there): that needs the spare's launch to have computed
# the very state the 3-rank run saved at that step, and the restore at 2
# ranks to give it back exactly. And the loss keeps falling after the shrink.
test_fsdp_example_on_a_spare_then_on_fewer_nodes_ends_bit_identical() {
  need_torch
  need_baton_python
  begin_case
  local d job node1 node2 l r at guess ref_pid before after STEP_NODES=3 MIN_NODES=2
  d=$(case_dir)
  sbatch_example "$d" "$REPO/examples/train_fsdp.sbatch" -N4 -- \
    --steps "$FSDP_STEPS" --step-ms "$EXAMPLE_STEP_MS" "${FSDP_OPTS[@]}"
  job=$JOB
  wait_for 180 "the first committed version" has_committed "$d"
  wait_step "$d/out" 7
  node1=$(rank_node "$job" 1)
  inalloc_fault "$job" "$d" 1 kill_node "$node1"
  l=$(launches "$d/out")
  [ "$(scontrol show hostnames "$(launch_nodes "$d/out" "$l")" | grep -cx "$node1")" = 0 ] || fail "the step ran on the dead $node1 again"
  expect_eq "$(scontrol show hostnames "$(launch_nodes "$d/out" "$l")" | wc -l)" 3 "nodes of the step on the spare"
  r=$(launch_resumed_from "$d/out" "$l")
  # Fault 2 comes 2 steps after this launch's first save (step r + 5): the
  # shrunk launch will most likely restore that one. The reference to it
  # starts now, beside the job (a later version: another reference below).
  guess=$((r + 5))
  fsdp_reference "$FSDP_STEPS" "$guess" >/dev/null &
  ref_pid=$!
  wait_for 120 "launch $l to commit a version after step $r" launch_saved_past "$d/out" "$l" "$r"
  wait_for 60 "launch $l to pass its saved version" launch_reached "$d/out" "$l" $((r + 7))
  node2=$(rank_node "$job" 1)
  inalloc_fault "$job" "$d" 2 kill_node "$node2"
  l=$(launches "$d/out")
  expect_eq "$(scontrol show hostnames "$(launch_nodes "$d/out" "$l")" | wc -l)" 2 "nodes of the step after the shrink"
  at=$(launch_resumed_from "$d/out" "$l")
  launch_out "$d/out" "$l" | grep "^resumed from step $at (restart 0, 2 ranks)$" >/dev/null ||
    fail "launch $l did not resume at 2 ranks: $(launch_out "$d/out" "$l" | grep '^resumed')"
  wait_for 180 "job $job to complete" job_state_is "$job" COMPLETED
  # (before the job leaves slurmctld's memory: MinJobAge is 10 s here)
  check_one_allocation "$job" "$d/out"
  revive_node "$node1"
  revive_node "$node2"
  wait "$ref_pid" || fail "the reference run to step $guess failed"
  [ "$at" = "$guess" ] || echo "the shrunk launch restored step $at, not $guess: a reference to step $at"
  expect_eq "$(launch_out "$d/out" "$l" | grep -c '^final_checksum=')" 1 "checksum lines of the 2-rank launch (rank 0's)"
  expect_eq "$(checksum_of "$d/out")" "$(fsdp_reference "$FSDP_STEPS" "$at")" \
    "final checksum, against 3 ranks to step $at then 2 ranks uninterrupted"
  before=$(mean_loss "$d/out" $((at - 4)) "$at")
  after=$(mean_loss "$d/out" $((FSDP_STEPS - 4)) "$FSDP_STEPS")
  echo "mean loss of steps $((at - 4))-$at (3 ranks) $before, of steps $((FSDP_STEPS - 4))-$FSDP_STEPS (2 ranks) $after"
  awk -v a="$before" -v b="$after" 'BEGIN { exit !(a != "" && b != "" && b < a) }' || fail "the loss did not fall after the shrink"
  check_causes "$d" "$node1" "$node2"
  for k in 1 2; do echo "fault $k: $(awk '{ printf "%.2f", $2 - $1 }' "$d/inalloc.$k") s from the kill to the first resumed step"; done
}

# Lightning (baton.lightning: CheckpointIO, Environment, AgreedStop) through
# a node failure on a spare. It saves at each epoch's end only: a resume
# from there ends bit for bit as an uninterrupted 3-rank run. (Not from a
# mid-epoch save, as Lightning stands: it runs the epoch's remaining number
# of batches but draws them from the epoch's start; python/baton/lightning.py.)
test_lightning_example_on_a_spare_resumes_at_an_epoch_end_bit_identical() {
  need_torch
  need_baton_python
  "$PY" -c 'import lightning' 2>/dev/null || { echo "SKIP: $PY cannot import lightning (scripts/install-deps --with-torch)"; exit 77; }
  begin_case
  local d job node l r ref_pid STEP_NODES=3
  d=$(case_dir)
  lightning_reference "$LIGHTNING_EPOCHS" >/dev/null &
  ref_pid=$!
  sbatch_example "$d" "$REPO/examples/train_lightning.sbatch" -N4 -- \
    --epochs "$LIGHTNING_EPOCHS" --step-ms "$EXAMPLE_STEP_MS" "${LIGHTNING_OPTS[@]}"
  job=$JOB
  wait_for 180 "the first committed version" has_committed "$d"
  wait_step "$d/out" $((LIGHTNING_STEPS_PER_EPOCH + 2))
  node=$(rank_node "$job" 1)
  inalloc_fault "$job" "$d" 1 kill_node "$node"
  l=$(launches "$d/out")
  [ "$(scontrol show hostnames "$(launch_nodes "$d/out" "$l")" | grep -cx "$node")" = 0 ] || fail "the step ran on the dead $node again"
  expect_eq "$(scontrol show hostnames "$(launch_nodes "$d/out" "$l")" | wc -l)" 3 "nodes of the step on the spare"
  r=$(launch_resumed_from "$d/out" "$l")
  expect_eq "$((r % LIGHTNING_STEPS_PER_EPOCH))" 0 "step $r resumed from, modulo the $LIGHTNING_STEPS_PER_EPOCH steps of an epoch (an epoch's end)"
  wait_for 180 "job $job to complete" job_state_is "$job" COMPLETED
  check_one_allocation "$job" "$d/out"
  revive_node "$node"
  wait "$ref_pid" || fail "the Lightning reference run failed"
  expect_eq "$(launch_out "$d/out" "$l" | grep -c 'final_checksum=')" 3 "checksum lines of the last launch"
  expect_eq "$(checksum_of "$d/out")" "$(lightning_reference "$LIGHTNING_EPOCHS")" "final checksum, against an uninterrupted 3-rank run"
  check_causes "$d" "$node"
  echo "fault 1: $(awk '{ printf "%.2f", $2 - $1 }' "$d/inalloc.1") s from the kill to the first resumed step"
}
