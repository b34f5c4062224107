# shellcheck shell=bash
# Shell cases for `baton report` (run by tests/mpi/report-np3.sh through
# tests/lib/run-cases): baton-train runs under mpirun, interrupted and
# resumed in one checkpoint directory, leave an event log (docs/events.md)
# from which the report counts the right steps, launches and restarts.

TRAIN=${BATON_BUILD_DIR:?}/examples/baton-train
BATON=$BATON_BUILD_DIR/cli/baton
MPIRUN_RANKS=$REPO/tests/lib/mpirun-ranks
WORK=$BATON_TEST_RESULTS/report-np3
OPTS=(--steps 60 --ckpt-every 7 --hidden 256 --step-ms 20 --progress 0)  # --progress 0: a step= line per step, waited for below
PY=/usr/bin/python3

mkdir -p "$WORK"
data() {
  [ -f "$WORK/data.bin" ] || "$TRAIN" --make-data "$WORK/data.bin" --samples 2048 >/dev/null
  echo "$WORK/data.bin"
}

start_bg() {  # start_bg OUT DIR: 3 ranks in the background; sets PID (mpirun's)
  : >"$1"
  "$MPIRUN_RANKS" 3 "$TRAIN" --data "$(data)" --ckpt-dir "$2" "${OPTS[@]}" >"$1" 2>&1 &
  PID=$!
}

wait_line() {  # wait_line OUT REGEX
  timeout 120 tail --pid="$PID" -n +1 -f "$1" | grep -m 1 -qE "$2" || true
  grep -qE "$2" "$1" || { cat "$1"; fail "no line matching '$2' before the run ended"; }
}

resume() {  # resume DIR: the rest of the run, to the end
  "$MPIRUN_RANKS" 3 "$TRAIN" --data "$(data)" --ckpt-dir "$1" "${OPTS[@]}" >"$1.resume.out" 2>&1 ||
    { cat "$1.resume.out"; fail "the resumed run failed"; }
}

# field JSON_FILE PYTHON_EXPRESSION_OF_r: one value of the report's JSON.
field() { "$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

test_agreed_stop_and_resume_counted_exactly() {
  local dir=$WORK/stop rc=0 stopped
  rm -rf "$dir"
  start_bg "$dir.out" "$dir"
  wait_line "$dir.out" '^step=17 '
  kill -USR2 "$PID"
  wait "$PID" || rc=$?
  expect_eq "$rc" 75 "exit status after the agreed stop"
  stopped=$(sed -n 's/^stop agreed at step \([0-9]*\):.*/\1/p' "$dir.out")
  [ -n "$stopped" ] || { cat "$dir.out"; fail "no 'stop agreed' line"; }
  # During the job, between its launches: the first launch alone.
  "$BATON" report "$dir" --json >"$dir.mid.json"
  expect_eq "$(field "$dir.mid.json" 'r["steps"]')" "$stopped" "steps after the first launch"
  expect_eq "$(field "$dir.mid.json" 'r["restarts"]')" 0 "restarts after the first launch"
  resume "$dir"
  "$BATON" report "$dir" --json >"$dir.json"
  cat "$dir.json"
  expect_eq "$(field "$dir.json" 'r["files"]')" 3 "log files (one per rank)"
  expect_eq "$(field "$dir.json" 'r["skipped_lines"]')" 0 "incomplete lines"
  expect_eq "$(field "$dir.json" 'r["steps"]')" 60 "distinct steps"
  expect_eq "$(field "$dir.json" '(r["first_step"], r["last_step"])')" "(1, 60)" "first and last step"
  expect_eq "$(field "$dir.json" 'r["step_computations"]')" 60 "step computations (the stop saved its step)"
  expect_eq "$(field "$dir.json" 'r["steps_computed_twice"]')" 0 "steps computed twice"
  expect_eq "$(field "$dir.json" 'r["restarts"]')" 1 "restarts"
  expect_eq "$(field "$dir.json" '[l["world"] for l in r["launches"]]')" "[3, 3]" "world sizes"
  expect_eq "$(field "$dir.json" '[l["ended"] for l in r["launches"]]')" "['stop', 'end']" "how each launch ended"
  expect_eq "$(field "$dir.json" 'r["launches"][1]["restored_step"]')" "$stopped" "the second launch's restored step"
  expect_eq "$(field "$dir.json" 'r["launches"][0]["last_step"]')" "$stopped" "the first launch's last step"
  expect_eq "$(field "$dir.json" 'r["interruptions"][0]["cause"]')" stop "the interruption's cause"
  expect_eq "$(field "$dir.json" 'r["interruptions"][0]["resumed_step"]')" "$((stopped + 1))" "the first resumed step"
  # Saves: every 7th step (8 up to 60), the stop's unless it fell on one, and the last (60).
  expect_eq "$(field "$dir.json" 'r["saves"]')" "$(( 8 + (stopped % 7 != 0) + 1 ))" "saves"
  expect_eq "$(field "$dir.json" '0 < r["goodput"] <= 1 and r["productive_seconds"] > 0.02 * 60')" True \
    "goodput in (0, 1] and at least 20 ms per step productive"
  expect_eq "$(field "$dir.json" 'abs(sum(x[k] for x in r["interruptions"] for k in ("detection_seconds","launch_seconds","setup_seconds","restore_seconds","first_step_seconds")) - r["interruptions"][0]["total_seconds"]) < 1e-6')" \
    True "the interruption's parts add up"
  expect_eq "$(field "$dir.json" 'abs(r["interruptions"][0]["restore_seconds"] - r["launches"][1]["restore_seconds"]) < 1e-6')" \
    True "the interruption's restore is the launch's restore (its own time, the set-up before it apart)"
  # The text form names the same figures.
  "$BATON" report "$dir" >"$dir.txt"
  cat "$dir.txt"
  grep -q '^steps computed twice:  0 (of 60 step computations)$' "$dir.txt" || fail "text: steps computed twice"
  grep -q '^launches:              2 (restarts: 1)$' "$dir.txt" || fail "text: launches"
  grep -Eq '^  detection [0-9.]+ s, scheduling and launch [0-9.]+ s, set-up [0-9.]+ s, restore [0-9.]+ s, first step [0-9.]+ s$' \
    "$dir.txt" || fail "text: the interruption's five parts"
}

test_killed_rank_then_resume_counts_the_lost_steps() {
  local dir=$WORK/kill victim
  rm -rf "$dir"
  start_bg "$dir.out" "$dir"
  wait_line "$dir.out" '^step=31 '
  victim=$(pgrep -P "$PID" | head -n 1)
  [ -n "$victim" ] || fail "no rank process under mpirun $PID"
  kill -9 "$victim"
  wait "$PID" && fail "mpirun exited 0 after a rank was killed"
  resume "$dir"
  "$BATON" report "$dir" --json >"$dir.json"
  cat "$dir.json"
  expect_eq "$(field "$dir.json" 'r["steps"]')" 60 "distinct steps"
  expect_eq "$(field "$dir.json" 'r["restarts"]')" 1 "restarts"
  # Every step the first launch logged past the version the second restored
  # was computed twice.
  expect_eq "$(field "$dir.json" 'r["steps_computed_twice"] == r["launches"][0]["last_step"] - r["launches"][1]["restored_step"]')" \
    True "steps computed twice = first launch's last step - restored step"
  # mpirun SIGKILLs the other ranks at once: none records the failure, and
  # the steps buffered since the last save are lost (docs/events.md), so the
  # log shows the first launch up to its last save at least.
  expect_eq "$(field "$dir.json" 'r["launches"][0]["last_step"] >= r["launches"][1]["restored_step"] >= 7')" True \
    "the first launch's logged steps reach the version the second restored"
  expect_eq "$(field "$dir.json" 'r["interruptions"][0]["resumed_step"] == r["launches"][1]["restored_step"] + 1')" \
    True "the first resumed step follows the restored one"
}

test_plot_writes_a_png() {
  command -v gnuplot >/dev/null || { echo "SKIP: gnuplot is not installed (scripts/install-deps)"; exit 77; }
  local dir=$WORK/stop
  [ -d "$dir/events" ] || fail "needs the log of test_agreed_stop_and_resume_counted_exactly"
  "$BATON" report "$dir" --plot "$WORK/timeline.png" >/dev/null
  expect_eq "$(head -c 4 "$WORK/timeline.png" | od -An -c | tr -d ' ')" '211PNG' "the PNG signature"
}

# Issue 47: a launch ended by a node failure read "ended: unknown"; a normal
# end was drawn as a red failure line; the legend covered the labels. A log
# of three launches (a node lost: the step_end record names it; the agreed
# stop; the end) and a gnuplot on PATH that keeps the script it is given.
test_every_launch_end_has_its_cause_and_the_plot_colours_it() {
  local dir=$WORK/causes out
  rm -rf "$dir"; mkdir -p "$dir/events" "$WORK/fakebin"
  cat >"$dir/events/7-r0.jsonl" <<'LOG'
{"ev":"start","t":100,"launch":"slurm:7.0/0","job":"7","rank":0,"world":2}
{"ev":"step","t":101,"step":1,"dur":1,"loss":3.0}
{"ev":"step","t":102,"step":2,"dur":1,"loss":2.9}
{"ev":"start","t":110,"launch":"slurm:7.1/0","job":"7","rank":0,"world":2}
{"ev":"step","t":111,"step":1,"dur":1,"loss":3.0}
{"ev":"step","t":112,"step":2,"dur":1,"loss":2.9}
{"ev":"stop","t":112.5,"step":2}
{"ev":"end","t":113,"step":2}
{"ev":"start","t":120,"launch":"slurm:7.2/0","job":"7","rank":0,"world":2}
{"ev":"step","t":121,"step":3,"dur":1,"loss":2.8}
{"ev":"end","t":122,"step":3}
{"ev":"start","t":130,"launch":"slurm:7.3/0","job":"7","rank":0,"world":2}
{"ev":"step","t":131,"step":4,"dur":1,"loss":2.7}
{"ev":"end","t":132,"step":4}
LOG
  echo '{"ev":"step_end","t":105,"job":"7","exit":137,"nodes":"n[1-2]","lost":[{"host":"n2","why":"DOWN"}]}' \
    >"$dir/events/7-batch.jsonl"
  out=$("$BATON" report "$dir") || fail "baton report failed: $out"
  echo "$out"
  grep -q "^  1\. slurm:7.0/0: .*ended: node failure$" <<<"$out" || fail "launch 1 is not ended by the node failure"
  grep -q "^  2\. slurm:7.1/0: .*ended: stop$" <<<"$out" || fail "launch 2 is not ended by the stop"
  grep -q "^  3\. slurm:7.2/0: .*ended: end$" <<<"$out" || fail "launch 3 did not end normally"
  ! grep -q "ended: unknown" <<<"$out" || fail "a launch ended unknown"
  printf '#!/bin/sh\ncat >"%s"\n' "$WORK/plot.gp" >"$WORK/fakebin/gnuplot"
  chmod +x "$WORK/fakebin/gnuplot"
  PATH=$WORK/fakebin:$PATH "$BATON" report "$dir" --plot "$WORK/causes.png" >/dev/null || fail "the plot failed"
  local gp; gp=$(cat "$WORK/plot.gp")
  grep -q "set label 'node failure: n2' .* tc rgb '#cc0000'" <<<"$gp" || fail "the node failure is not red: $gp"
  grep -q "set label 'stop' .* tc rgb '#c07000'" <<<"$gp" || fail "the stop is not amber: $gp"
  grep -q "set label 'end' .* tc rgb '#777777'" <<<"$gp" || fail "the normal end is not grey: $gp"
  [ "$(grep -c "'#cc0000'" <<<"$gp")" = 2 ] || fail "red is used for more than the node failure: $gp"
  grep -q "^set key outside bottom" <<<"$gp" || fail "the legend is not outside, below the plot: $gp"
  if command -v gnuplot >/dev/null; then
    "$BATON" report "$dir" --plot "$WORK/causes.png" >/dev/null || fail "gnuplot failed on the script"
    expect_eq "$(head -c 4 "$WORK/causes.png" | od -An -c | tr -d ' ')" '211PNG' "the PNG signature"
  fi
}
