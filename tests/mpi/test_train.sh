# shellcheck shell=bash
# Shell cases for examples/baton-train under mpirun (run by
# tests/mpi/train-np3.sh through tests/lib/run-cases): every interrupted run,
# resumed, ends with the uninterrupted run's final checksum, and resumes from
# the newest version `baton ckpt ls --json` lists after the interruption.

TRAIN=${BATON_BUILD_DIR:?}/examples/baton-train
BATON=$BATON_BUILD_DIR/cli/baton
MPIRUN_RANKS=$REPO/tests/lib/mpirun-ranks
WORK=$BATON_TEST_RESULTS/train-np3
# Short runs with room to interrupt: ~25 ms of compute a step, a checkpoint
# every 7 steps (so stops fall between checkpoints as well as on them),
# saved asynchronously (SaveAsync; issue 17): every interruption below meets
# a save in flight or just committed. One case runs synchronous saves.
# --progress 0: a step=N line after every step, which the cases wait for.
OPTS=(--steps 60 --ckpt-every 7 --hidden 256 --step-ms 20 --ckpt-mode async --progress 0)

mkdir -p "$WORK"
data() {  # the data set, made once per suite
  [ -f "$WORK/data.bin" ] || "$TRAIN" --make-data "$WORK/data.bin" --samples 2048 >/dev/null
  echo "$WORK/data.bin"
}

train() {  # train RANKS CKPT_DIR [ARGS...]: one run in the foreground
  local n=$1 dir=$2
  shift 2
  "$MPIRUN_RANKS" "$n" "$TRAIN" --data "$(data)" --ckpt-dir "$dir" "${OPTS[@]}" "$@"
}

checksums() { sed -n 's/^final_checksum=//p' "$1" | sort -u; }

# The uninterrupted run's checksum at RANKS ranks, computed once per suite.
reference() {
  local n=${1:-3} f=$WORK/reference-np${1:-3}
  if [ ! -s "$f" ]; then
    rm -rf "$WORK/ref-ckpt-np$n"
    train "$n" "$WORK/ref-ckpt-np$n" >"$f.out" 2>&1 || { cat "$f.out"; fail "the reference run failed"; }
    [ "$(grep -c '^final_checksum=' "$f.out")" = "$n" ] || fail "the reference printed no checksum on every rank"
    [ "$(checksums "$f.out" | wc -l)" = 1 ] || fail "the reference's ranks disagree: $(checksums "$f.out")"
    checksums "$f.out" >"$f"
  fi
  cat "$f"
}

# The step of the newest committed version in DIR (none: "none").
newest_committed() {
  local json rc=0
  json=$("$BATON" ckpt ls "$1" --json) || rc=$?
  # Exit 1 with an empty list: the directory holds no version yet (a kill before the first save).
  if [ "$rc" -ne 0 ] && [ "$json" != "[]" ]; then fail "baton ckpt ls $1 --json: exit $rc: $json"; fi
  printf '%s\n' "$json" | perl -MJSON::PP -e '
    my @c = sort { $a->{seq} <=> $b->{seq} } grep { $_->{status} eq "complete" } @{ decode_json(join "", <STDIN>) };
    print @c ? $c[-1]{step} : "none", "\n"'
}

# start_bg OUT RANKS DIR [ARGS...]: a run in the background; sets PID (mpirun's).
start_bg() {
  local out=$1 n=$2 dir=$3
  shift 3
  : >"$out"  # exists before wait_line's tail opens it
  "$MPIRUN_RANKS" "$n" "$TRAIN" --data "$(data)" --ckpt-dir "$dir" "${OPTS[@]}" "$@" >"$out" 2>&1 &
  PID=$!
}

# wait_line OUT REGEX: until rank 0 prints a line matching REGEX (or mpirun ends).
wait_line() {
  timeout 120 tail --pid="$PID" -n +1 -f "$1" | grep -m 1 -qE "$2" || true
  grep -qE "$2" "$1" || { cat "$1"; fail "no line matching '$2' before the run ended"; }
}

# resume_and_check N DIR: resumes in DIR, expects the newest committed
# version as the resumed step and the reference checksum.
resume_and_check() {
  local n=$1 dir=$2 want out
  want=$(newest_committed "$dir")
  [ "$want" != none ] || fail "no committed version in $dir to resume from"
  out=$(mktemp "$WORK/resume.XXXXXX")
  train "$n" "$dir" >"$out" 2>&1 || { cat "$out"; fail "the resumed run failed"; }
  grep -q "^resumed from step $want (restart 0)$" "$out" ||
    fail "expected 'resumed from step $want', got: $(grep -E '^(resumed|no checkpoint)' "$out")"
  expect_eq "$(checksums "$out")" "$(reference "$n")" "final checksum after resuming from step $want"
  [ "$(grep -c '^final_checksum=' "$out")" = "$n" ] || fail "not every rank printed its checksum"
  echo "resumed from step $want: checksum $(reference "$n") as uninterrupted"
}

test_bad_values_are_refused_with_name_and_value_before_mpi() {
  local out rc
  for bad in "--lr 0" "--lr abc" "--steps 0" "--ckpt-every -1" "--hidden 0" "--step-ms -3" "--max-restarts x" \
             "--batch 0" "--global-batch 0" "--micro-batches x" "--reduce tree" "--progress -1" "--seed -1" "--ckpt-mode fast" "--ckpt-stop-seconds -1" "--restore-level 2" "--bogus 1"; do
    rc=0
    # shellcheck disable=SC2086
    out=$("$MPIRUN_RANKS" 3 "$TRAIN" --data "$(data)" --ckpt-dir "$WORK/never" $bad 2>&1) || rc=$?
    expect_eq "$rc" 2 "exit status for $bad"
    local want="baton-train: ${bad%% *}: '${bad#* }'"
    [ "$bad" = "--bogus 1" ] && want="baton-train: unknown option '--bogus'"
    echo "$out" | grep -qF -- "$want" || fail "$bad: no message naming it ($want): $out"
  done
  # Refused before the Checkpointer (a collective) ran: it would have made the directory.
  [ ! -e "$WORK/never" ] || fail "a refused run created its checkpoint directory"
  rc=0; out=$("$TRAIN" --data "$WORK/missing.bin" --ckpt-dir "$WORK/never" 2>&1) || rc=$?
  expect_eq "$rc" 2 "exit status for a missing --data"
  echo "$out" | grep -q -- "--data: cannot open '$WORK/missing.bin'" || fail "missing data not named: $out"
  rc=0; out=$(env -u BATON_CKPT_DIR "$TRAIN" --data "$(data)" 2>&1) || rc=$?
  expect_eq "$rc" 2 "exit status without --ckpt-dir or BATON_CKPT_DIR"
  echo "$out" | grep -q -- "--ckpt-dir: missing, and BATON_CKPT_DIR is not set" || fail "no ckpt-dir message: $out"
}

test_damaged_data_set_is_refused() {
  local d=$WORK/damaged.bin out rc=0
  cp "$(data)" "$d"
  printf 'X' | dd of="$d" bs=1 seek=100000 conv=notrunc status=none
  out=$("$TRAIN" --data "$d" --ckpt-dir "$WORK/never" 2>&1) || rc=$?
  expect_eq "$rc" 1 "exit status for a damaged data set"
  echo "$out" | grep -q "payload checksum mismatch" || fail "no checksum message: $out"
}

test_uninterrupted_runs_agree_across_ranks_and_repeat_bit_for_bit() {
  local a b dir=$WORK/repeat
  a=$(reference 3)
  rm -rf "$dir"
  train 3 "$dir" --ckpt-every 0 >"$dir.out" 2>&1 || { cat "$dir.out"; fail "second run failed"; }
  b=$(checksums "$dir.out")
  expect_eq "$b" "$a" "checksum of a second uninterrupted run (no periodic checkpoints)"
  grep -qE '^step=60 loss=[0-9.]+ ' "$dir.out" || fail "no step line for the last step"
  grep -q '^no checkpoint in .*: starting at step 1 (restart 0)$' "$dir.out" || fail "no first-run line"
  [ "$(tail -n 1 "$dir.out")" = "final_checksum=$a" ] || fail "the last line is not the checksum"
  # Synchronous saves: the same numbers, and the same versions committed.
  rm -rf "$dir"
  train 3 "$dir" --ckpt-mode sync >"$dir.out" 2>&1 || { cat "$dir.out"; fail "the synchronous run failed"; }
  expect_eq "$(checksums "$dir.out")" "$a" "checksum of a run with synchronous saves"
  grep -q '^checkpoint step=56 .*[0-9]$' "$dir.out" || fail "no synchronous checkpoint line for step 56"
  grep -q '^checkpoint step=56 .* async$' "$WORK/reference-np3.out" || fail "the reference did not save asynchronously"
}

test_agreed_stop_saves_exits_75_and_resumes_bit_identical() {
  local dir=$WORK/stop rc=0
  rm -rf "$dir"
  start_bg "$dir.out" 3 "$dir"
  wait_line "$dir.out" '^step=17 '
  kill -USR2 "$PID"  # mpirun forwards SIGUSR2 to every rank
  wait "$PID" || rc=$?
  cat "$dir.out"
  expect_eq "$rc" 75 "exit status after an agreed stop"
  local stopped
  stopped=$(sed -n 's/^stop agreed at step \([0-9]*\):.*/\1/p' "$dir.out")
  [ -n "$stopped" ] || fail "no 'stop agreed' line"
  expect_eq "$(newest_committed "$dir")" "$stopped" "newest committed version after the stop"
  # No more than one step of work lost: the stop saved the step it stopped at.
  expect_eq "$(grep -c "^step=$((stopped + 1)) " "$dir.out")" 0 "steps after the agreed one"
  resume_and_check 3 "$dir"
}

test_kill9_of_one_rank_then_resume_from_newest_committed() {
  local dir=$WORK/kill-rank victim
  rm -rf "$dir"
  start_bg "$dir.out" 3 "$dir"
  wait_line "$dir.out" '^step=31 '
  victim=$(pgrep -P "$PID" | head -n 1)  # one of the ranks mpirun started
  [ -n "$victim" ] || fail "no rank process under mpirun $PID"
  kill -9 "$victim"
  wait "$PID" && fail "mpirun exited 0 after a rank was killed"
  resume_and_check 3 "$dir"
}

test_kill9_of_mpirun_and_every_rank_during_a_save_then_resume() {
  local dir=$WORK/kill-all pids
  rm -rf "$dir"
  start_bg "$dir.out" 3 "$dir"
  # step=28 is printed just before the save of step 28 starts.
  wait_line "$dir.out" '^step=28 '
  pids=$(pgrep -P "$PID" | tr '\n' ' ')
  # shellcheck disable=SC2086
  kill -9 "$PID" $pids
  wait "$PID" || true
  "$BATON" ckpt ls "$dir"
  resume_and_check 3 "$dir"
}

test_interrupted_many_times_at_random_moments_still_bit_identical() {
  local dir=$WORK/many seed=${BATON_TEST_SEED:-$RANDOM} i step rc
  rm -rf "$dir"
  RANDOM=$seed
  echo "random seed $seed (BATON_TEST_SEED=$seed repeats it)"
  local at=0
  for i in 1 2 3 4; do
    at=$((at + 3 + RANDOM % 10))
    [ "$at" -lt 58 ] || break
    start_bg "$dir.$i.out" 3 "$dir"
    wait_line "$dir.$i.out" "^step=$at "
    case $((RANDOM % 3)) in
      0) kill -USR2 "$PID"; echo "run $i: stop signal after step $at" ;;
      1) kill -9 "$(pgrep -P "$PID" | head -n 1)"; echo "run $i: kill -9 of a rank after step $at" ;;
      2) kill -9 "$PID" $(pgrep -P "$PID"); echo "run $i: kill -9 of mpirun and its ranks after step $at" ;;
    esac
    rc=0; wait "$PID" || rc=$?
    step=$(newest_committed "$dir")
    echo "  exit $rc, newest committed step $step"
    [ "$step" = none ] || at=$step
  done
  resume_and_check 3 "$dir"
}

test_one_rank_stop_and_resume_matches_one_rank_reference() {
  local dir=$WORK/np1 rc=0
  rm -rf "$dir"
  start_bg "$dir.out" 1 "$dir"
  wait_line "$dir.out" '^step=40 '
  kill -USR2 "$PID"
  wait "$PID" || rc=$?
  expect_eq "$rc" 75 "exit status after an agreed stop at one rank"
  resume_and_check 1 "$dir"
}

test_resuming_with_other_options_is_refused_naming_them() {
  local dir=$WORK/other out rc=0
  rm -rf "$dir"
  train 3 "$dir" --steps 7 >/dev/null 2>&1 || fail "the first run failed"
  out=$(train 3 "$dir" --lr 0.02 2>&1) || rc=$?
  expect_eq "$rc" 2 "exit status when resuming with another --lr"
  echo "$out" | grep -q -- "made with --lr 0.01 (this run: 0.02)" || fail "the option is not named: $out"
  # (Another world size is not another option: tests/mpi/test_train_world.sh.)
}

test_restart_cap_stops_with_exit_3_and_says_why() {
  local dir=$WORK/cap out rc
  rm -rf "$dir"
  # Job 42's first run (restart 0) saves step 7 and ends.
  SLURM_JOB_ID=42 SLURM_RESTART_COUNT=0 train 3 "$dir" --steps 7 >/dev/null 2>&1 || fail "the first run failed"
  # Restart 4 finds the same version: restarts 2, 3 and 4 came to nothing, 3 = --max-restarts: go on.
  rc=0; out=$(SLURM_JOB_ID=42 SLURM_RESTART_COUNT=4 train 3 "$dir" --steps 8 --max-restarts 3 2>&1) || rc=$?
  expect_eq "$rc" 0 "exit status at 3 restarts without progress, --max-restarts 3"
  echo "$out" | grep -q '^resumed from step 7 (restart 4)$' || fail "no resume line: $out"
  # Restart 9 finds step 8, saved by restart 4: restart 5 found it new, 6..9 did not:
  # 4 restarts without progress, more than 3: stop.
  rc=0; out=$(SLURM_JOB_ID=42 SLURM_RESTART_COUNT=9 train 3 "$dir" --steps 20 --max-restarts 3 2>&1) || rc=$?
  echo "$out"
  expect_eq "$rc" 3 "exit status at 4 restarts without progress, --max-restarts 3"
  echo "$out" | grep -q '^restart cap: 4 restart(s) in a row found no newer checkpoint than step 8 (--max-restarts 3); stopping without requeue$' ||
    fail "no restart-cap line"
  echo "$out" | grep -q '(job 42). .*resume by hand: submit the job again' || fail "no hint how to resume by hand"
  ! echo "$out" | grep -q '^step=' || fail "trained after reaching the cap"
  # Another job on the same directory counts its own restarts only.
  rc=0; SLURM_JOB_ID=77 SLURM_RESTART_COUNT=0 train 3 "$dir" --steps 9 >/dev/null 2>&1 || rc=$?
  expect_eq "$rc" 0 "exit status of a new job (restart 0) on the same directory"
}

test_readme_shows_train_sbatch_whole() {
  local shown
  shown=$(awk '/^## The job script/{f=1} f && /^```bash$/{p=1; next} p && /^```$/{exit} p' "$REPO/README.md")
  [ -n "$shown" ] || fail "README.md has no bash block under 'The job script'"
  diff <(echo "$shown") "$REPO/examples/train.sbatch" || fail "README.md's job script differs from examples/train.sbatch"
}
