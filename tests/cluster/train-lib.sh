# shellcheck shell=bash
# The training job on the local cluster, for the suites that drive it
# (tests/cluster/test_train.sh, tests/fault/campaign.sh): the data set, the
# uninterrupted reference, submitting examples/train.sbatch (`baton run`),
# reading its output, finding a rank's process, and the checks after a fault.
#
# The sourcing file sets WORK (a directory for the data set and the
# references), STEPS, OPTS (baton-train options of every run) and STEP_MS.
# Jobs run 3 ranks, one per node (-N3 of the 4 nodes) unless told otherwise.
# Another job script (examples/train_ddp.sbatch, tests/cluster/test_torch.sh)
# reuses the output readers and the fault checks (`baton run`'s lines): it
# sets RANK_PROG (its ranks' process name), and redefines reference and submit.

TRAIN=${BATON_BUILD_DIR:?}/examples/baton-train
BATON=$BATON_BUILD_DIR/cli/baton
SCRIPT=$REPO/examples/train.sbatch

data() {
  [ -f "$WORK/data.bin" ] || "$TRAIN" --make-data "$WORK/data.bin" --samples 2048 >/dev/null
  echo "$WORK/data.bin"
}

reference() {  # reference STEPS [RANKS]: the uninterrupted run's checksum
  local n=$1 ranks=${2:-3} f=$WORK/reference-$1-np${2:-3}
  if [ ! -s "$f" ]; then
    rm -rf "$f.ckpt"
    "$REPO/tests/lib/mpirun-ranks" "$ranks" "$TRAIN" --data "$(data)" --ckpt-dir "$f.ckpt" --steps "$n" "${OPTS[@]}" \
      >"$f.out" 2>&1 || { cat "$f.out"; fail "the reference run failed"; }
    sed -n 's/^final_checksum=//p' "$f.out" | sort -u >"$f"
    [ "$(wc -l <"$f")" = 1 ] || fail "the reference's ranks disagree"
  fi
  cat "$f"
}

# Every case runs in its own subshell: at its exit, whatever it leaves is
# cleaned up, pass or fail (jobs cancelled, killed nodes revived), so the
# next case finds four idle nodes.
# begin_case: the first line of every case (traps are not inherited by the
# case's subshell).
begin_case() {
  CASE_JOBS='' CASE_DOWN='' CASE_MOUNTS=''
  trap cleanup EXIT
}
cleanup() {
  local j n
  for j in $CASE_JOBS; do scancel "$j" 2>/dev/null || true; done
  for n in $CASE_DOWN; do
    case $(sinfo -h -N -n "$n" -o %t | head -n 1) in
      down*|drain*|fail*) "$REPO/scripts/local-cluster" revive-node "$n" >&2 || true ;;
    esac
  done
  # CASE_MOUNTS: file systems a case mounted (its checkpoint directory), once its jobs are gone.
  for n in $CASE_MOUNTS; do
    umount "$n" 2>/dev/null || { sleep 2; umount -l "$n"; } || true
  done
}
kill_node() { CASE_DOWN="$CASE_DOWN $1"; "$REPO/scripts/local-cluster" kill-node "$1"; }
revive_node() { "$REPO/scripts/local-cluster" revive-node "$1"; }

# The checkpoint directory of a case's jobs: DIR/ckpt, or CASE_CKPT.
ckpt_dir() { echo "${CASE_CKPT:-$1/ckpt}"; }

# submit DIR STEPS [SBATCH OPTIONS...] [-- TRAIN OPTIONS...]: sets JOB.
# SUBMIT_TRAIN: another program for the job script to run (a wrapper);
# COLLECTIVE_TIMEOUT: the deadline of a collective, s (10). The launches
# again inside the allocation (`baton run`, run_opts): STEP_RESTARTS (0
# unless set: every failure is a requeue), STEP_NODES, MIN_NODES;
# LOCAL_DIR: the node-local checkpoint directory (level 2).
submit() {
  local d=$1 steps=$2 sb=() tr=()
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do sb+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  tr=("$@")
  # Level 2 is the job's choice (BATON_LOCAL_DIR alone only offers it).
  [ -n "${LOCAL_DIR:-}" ] && tr+=(--ckpt-level2 on)
  local job
  job=$(BATON_TRAIN=${SUBMIT_TRAIN:-$TRAIN} BATON_CKPT_DIR=$(ckpt_dir "$d") BATON_COLLECTIVE_TIMEOUT=${COLLECTIVE_TIMEOUT:-10} \
    BATON_CLI=$BATON BATON_RUN_OPTS="$(run_opts "${STEP_RESTARTS:-0}")" BATON_LOCAL_DIR=${LOCAL_DIR:-} \
    sbatch --parsable -N3 --ntasks-per-node=1 -o "$d/out" "${sb[@]}" "$SCRIPT" \
    --data "$(data)" --steps "$steps" --step-ms "$STEP_MS" "${OPTS[@]}" "${tr[@]}") || return 1
  CASE_JOBS="$CASE_JOBS $job"
  # shellcheck disable=SC2034 # the caller's
  JOB=$job
  echo "submitted job $job"
}

# run_opts RESTARTS: baton run's options from STEP_NODES and MIN_NODES (the
# job's node count and the step's when unset), as BATON_RUN_OPTS.
run_opts() { echo "--max-restarts $1${STEP_NODES:+ --step-nodes $STEP_NODES}${MIN_NODES:+ --min-nodes $MIN_NODES}"; }

# A job's output holds all its runs (--open-mode=append); each starts with
# baton run's "start on" line, which names the run's restart count.
SCRIPT_NAME="baton run"
RANK_PROG=${RANK_PROG:-baton-train}
run_out() { [ -f "$1" ] && awk -v k="$2" -v mark="[$SCRIPT_NAME " 'index($0, mark) == 1 && / start on /{n++} n==k' "$1"; }
runs() { grep -c "^\\[$SCRIPT_NAME .*\\] start on " "$1" 2>/dev/null || true; }
last_step() { sed -n 's/^step=\([0-9]*\) .*/\1/p' | tail -n 1; }
# Predicates for wait_for (which runs its command again and again).
runs_at_least() { [ "$(runs "$1")" -ge "$2" ]; }
restarts_above() { [ "$(job_field "$1" Restarts)" -gt "$2" ] 2>/dev/null; }
# reached OUT STEP: the job's current run printed a step >= STEP.
reached() { [ "$(run_out "$1" "$(runs "$1")" | last_step)" -ge "$2" ] 2>/dev/null; }
wait_step() { wait_for 120 "the current run to reach step $2" reached "$@"; }

# newest_committed DIR: the step of DIR's newest complete version; "none"
# when it has none, or no such directory yet (a job that has not started:
# `baton ckpt ls` fails, and an empty answer read as a version made
# has_committed true at once).
newest_committed() {
  local ls
  ls=$("$BATON" ckpt ls "$1" --json 2>/dev/null) || { echo none; return 0; }
  perl -MJSON::PP -e '
    my @c = sort { $a->{seq} <=> $b->{seq} } grep { $_->{status} eq "complete" } @{ decode_json(join "", <STDIN>) };
    print @c ? $c[-1]{step} : "none", "\n"' <<<"$ls"
}

has_committed() { [ "$(newest_committed "$(ckpt_dir "$1")")" != none ]; }

# The pid of rank R of JOB, found by its environment (never by a pattern):
# this cluster's SLURM_CONF, the job id and the task id.
rank_pid() {
  local job=$1 r=$2 p
  for p in $(pgrep -x "$RANK_PROG"); do
    [ "$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
         grep -cxF -e "SLURM_JOB_ID=$job" -e "SLURM_PROCID=$r" -e "SLURM_CONF=$SLURM_CONF")" = 3 ] &&
      { echo "$p"; return 0; }
  done
  return 1
}
rank_node() { tr '\0' '\n' <"/proc/$(rank_pid "$1" "$2")/environ" | sed -n 's/^SLURMD_NODENAME=//p'; }

# before_fault JOB DIR K: call just before injecting fault K; records the
# restart count of the run it hits (in DIR/fault.K: restart, run index, and
# later the newest committed step).
before_fault() {
  local restarts
  restarts=$(job_field "$1" Restarts)
  echo "${restarts:-0} $(runs "$2/out")" >"$2/fault.$3"
}

# after_fault JOB DIR K: once the job is requeued after fault K and the
# faulted run is gone (pending again; the next run cannot start for the 10 s
# of cred_expire), records the newest committed version, the one the next
# run must resume from.
after_fault() {
  local job=$1 d=$2 k=$3 r run newest
  read -r r run <"$d/fault.$k"
  wait_for 120 "job $job to be requeued after fault $k" restarts_above "$job" "$r"
  wait_for 60 "job $job to be pending again" job_state_is "$job" PENDING
  newest=$(newest_committed "$(ckpt_dir "$d")")
  echo "$r $run $newest" >"$d/fault.$k"
  echo "after fault $k (run $run, restart $r): newest committed version is step $newest"
  [ "$newest" != none ] || fail "no committed version before fault $k"
}

# check_stop_lost_nothing DIR K: fault K asked for an agreed stop: the
# faulted run's last step is its stop step, which it saved (no work lost).
check_stop_lost_nothing() {
  local d=$1 k=$2 r run want stop
  read -r r run want <"$d/fault.$k"
  stop=$(run_out "$d/out" "$run" | sed -n 's/^stop agreed at step \([0-9]*\):.*/\1/p')
  expect_eq "$stop" "$want" "the agreed stop step of fault $k, the newest committed version"
  expect_eq "$(run_out "$d/out" "$run" | last_step)" "$stop" "last step of the stopped run"
}

# Runs that died before baton-train started (no resume or first-run line):
# Open MPI's start-up crash on this one-machine cluster (docs/testing.md),
# about 1 launch in 10 here. A job survives it by its own requeue; each is
# counted and shown, not hidden.
launch_crashes() {
  local out=$1 k n=0
  for k in $(seq 1 "$(runs "$out")"); do
    # (grep without -q: it must read everything, or pipefail sees awk's SIGPIPE)
    if ! run_out "$out" "$k" | grep -E '^(resumed from step|no checkpoint in) ' >/dev/null; then
      n=$((n + 1))
      echo "run $k ended before baton-train started (a launch crash):" >&2
      run_out "$out" "$k" | grep -E 'Segmentation|srun: error|step ended' | head -n 3 >&2
    fi
  done
  echo "$n"
}

# check_resumes DIR FAULTS: after fault k (hitting restart r), the first run
# of restart > r that started baton-train resumed from the version recorded.
check_resumes() {
  local d=$1 faults=$2 k r run want got
  for k in $(seq 1 "$faults"); do
    read -r r run want <"$d/fault.$k"
    got=$(sed -n 's/^resumed from step \([0-9]*\) (restart \([0-9]*\))$/\2 \1/p' "$d/out" |
          awk -v r="$r" '$1 > r { print $2; exit }')
    expect_eq "$got" "$want" "step resumed from after fault $k"
    [ "$want" -gt 0 ] || fail "resumed from step 0 after fault $k"
    echo "fault $k: the run printed up to step $(run_out "$d/out" "$run" | last_step); resumed from $got"
  done
}

# check_job JOB DIR FAULTS STEPS [RANKS]: the job completed; after every
# fault the next run resumed from the newest committed version; Restarts =
# FAULTS + launch crashes (listed); the checksum is the reference's.
check_job() {
  local job=$1 d=$2 faults=$3 steps=$4 ranks=${5:-3} crashes
  wait_for 180 "job $job to complete" job_state_is "$job" COMPLETED
  cat "$d/out"
  crashes=$(launch_crashes "$d/out")
  expect_eq "$(job_field "$job" Restarts)" "$((faults + crashes))" \
    "Restarts of job $job ($faults faults injected, $crashes launch crashes)"
  check_resumes "$d" "$faults"
  expect_eq "$(run_out "$d/out" "$(runs "$d/out")" | grep -c '^final_checksum=')" "$ranks" "checksum lines of the last run"
  expect_eq "$(sed -n 's/^final_checksum=//p' "$d/out" | sort -u)" "$(reference "$steps" "$ranks")" "final checksum"
}

# ---- launches again inside the allocation (`baton run`) ----
# Every launch of the step prints "[baton run ...] step launch L on
# NODES ..."; launch_out OUT K: the lines of the K-th launch in the whole
# output (all runs), up to the next launch or run.
launches() { grep -c "^\\[$SCRIPT_NAME .*\\] step launch " "$1" 2>/dev/null || true; }
launch_out() {
  awk -v k="$2" -v mark="[$SCRIPT_NAME " 'index($0, mark) == 1 && / step launch /{n++} index($0, mark) == 1 && / start on /{if (n == k) n = -1} n==k' "$1"
}
launch_nodes() { launch_out "$1" "$2" | sed -n 's/.* step launch [0-9]* on \([^ ]*\) .*/\1/p'; }
# saving_launch OUT STEP: the number (as launch_out counts) of the launch
# that saved version STEP: the last launch before the newest that started
# below STEP (resumed from a smaller step, or from nothing).
saving_launch() {
  local k r saver=1
  for ((k = 1; k < $(launches "$1"); k++)); do
    r=$(launch_out "$1" "$k" | sed -n 's/^resumed from step \([0-9]*\) .*/\1/p' | head -n 1)
    [ "${r:-0}" -lt "$2" ] && saver=$k
  done
  echo "$saver"
}
launches_at_least() { [ "$(launches "$1")" -ge "$2" ]; }
step_ends() { grep -c "^\\[$SCRIPT_NAME .*\\] step ended with " "$1" 2>/dev/null || true; }
step_ends_at_least() { [ "$(step_ends "$1")" -ge "$2" ]; }
launch_reached() { [ "$(launch_out "$1" "$2" | last_step)" -ge "$3" ] 2>/dev/null; }

# The newest complete version of DIR's checkpoints saved at or before the
# epoch second T (the old step's end: the next launch cannot have saved by
# then), from `baton ckpt ls --json` snapshots FILES (versions come and go:
# retention removes old ones once the next launch saves).
newest_complete_before() {
  local t=$1
  shift
  cat "$@" | perl -MJSON::PP -MTime::Local -e '
    my $t = shift; my %c;
    for my $line (<STDIN>) {
      next unless $line =~ /\S/;
      for my $v (@{ decode_json($line) }) {
        next unless $v->{status} eq "complete" && defined $v->{time};
        my ($Y, $M, $D, $h, $m, $s) = $v->{time} =~ /^(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)Z$/ or next;
        $c{$v->{seq}} = $v->{step} if timegm($s, $m, $h, $D, $M - 1, $Y) <= $t;
      }
    }
    my @s = sort { $a <=> $b } keys %c;
    print @s ? $c{$s[-1]} : "none", "\n"' "$t"
}

# inalloc_fault JOB DIR K COMMAND...: injects fault K (COMMAND) into the
# current launch and checks what the launch after it did, inside the same
# allocation: the step ended, was launched again within the allocation,
# resumed from the newest version committed before the old step ended
# (`baton ckpt ls --json`, listed as soon as it ended) and not from step 0;
# with LOCAL_DIR, read it from level 2 (rank 0's "restored step N from
# level 2"). Writes "KILL_TIME FIRST_RESUMED_STEP_TIME" to DIR/inalloc.K and
# prints the seconds from the fault to the first resumed step.
inalloc_fault() {
  local job=$1 d=$2 k=$3 ends l t_kill t_end want got t_first level r0
  shift 3
  r0=$(job_field "$job" Restarts)
  ends=$(step_ends "$d/out")
  l=$(launches "$d/out")
  t_kill=$(date +%s.%N)
  "$@"
  wait_for 60 "the step to end after fault $k" step_ends_at_least "$d/out" $((ends + 1))
  "$BATON" ckpt ls "$(ckpt_dir "$d")" --json | tr -d '\n' >"$d/ls.$k.0"
  echo >>"$d/ls.$k.0"
  t_end=$(grep "^\\[$SCRIPT_NAME .*\\] step ended with " "$d/out" | sed -n "$((ends + 1))p" | sed -n 's/.* at time=\([0-9]*\).*/\1/p')
  [ -n "$t_end" ] || fail "fault $k: the step ended without launching again: $(grep "^\\[$SCRIPT_NAME" "$d/out" | tail -n 2)"
  wait_for 60 "launch $((l + 1)) after fault $k" launches_at_least "$d/out" $((l + 1))
  "$BATON" ckpt ls "$(ckpt_dir "$d")" --json | tr -d '\n' >"$d/ls.$k.1"
  echo >>"$d/ls.$k.1"
  want=$(newest_complete_before "$t_end" "$d/ls.$k.0" "$d/ls.$k.1")
  # The launch that resumed: the next one, or a later one when the next died
  # in MPI_Init (a launch crash, docs/testing.md; it counts against the cap).
  wait_for 60 "a launch after fault $k to resume" launch_resumed_after "$d/out" "$l"
  l=$(launch_resumed_after "$d/out" "$l")
  wait_for 60 "launch $l to pass its first step" launch_reached "$d/out" "$l" 1
  got=$(launch_out "$d/out" "$l" | sed -n 's/^resumed from step \([0-9]*\) .*/\1/p')
  expect_eq "$(job_field "$job" Restarts)" "$r0" "Restarts of job $job after fault $k (no requeue)"
  expect_eq "$got" "$want" "step launch $l resumed from (fault $k), against baton ckpt ls --json before it"
  if [ "$want" = none ] || [ "$want" -eq 0 ]; then fail "fault $k: resumed from step $want"; fi
  t_first=$(launch_out "$d/out" "$l" | sed -n 's/^step=.* time=\([0-9.]*\)$/\1/p' | head -n 1)
  echo "$t_kill $t_first" >"$d/inalloc.$k"
  if [ -n "${LOCAL_DIR:-}" ]; then
    level=$(launch_out "$d/out" "$l" | sed -n "s/.*restored step $got from level \\([0-9]\\).*/\\1/p" | head -n 1)
    expect_eq "$level" "${WANT_LEVEL:-2}" "level fault $k's restore read"
  fi
  echo "fault $k: launch $l on $(launch_nodes "$d/out" "$l") resumed from step $got;" \
    "fault to first resumed step $(awk -v a="$t_kill" -v b="$t_first" 'BEGIN { printf "%.2f", b - a }') s"
}
# launch_resumed_after OUT L: prints the first launch after L that resumed
# (fails while there is none); the launches between died before baton-train
# started and are shown.
launch_resumed_after() {
  local k n
  n=$(launches "$1")
  for k in $(seq $(($2 + 1)) "$n"); do
    if launch_out "$1" "$k" | grep -E '^resumed from step ' >/dev/null; then
      echo "$k"
      return 0
    fi
    [ "$k" -lt "$n" ] && echo "launch $k ended before baton-train resumed (a launch crash)" >&2
  done
  return 1
}
