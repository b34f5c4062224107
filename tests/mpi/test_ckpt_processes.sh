# shellcheck shell=bash
# Shell cases (tests/mpi/ckpt-procs-np3.sh): checkpoints across processes.
# A restore that dies while reading a version is counted, so a version that
# kills every restore ends in quarantine instead of a crash loop (issue 15,
# item 2), but a preemption (a stop signal, every rank still alive) is not
# (issue 32, item 5); a second live writer of a directory is refused and a dead
# writer's lock is free, so a requeued or chained job resumes (item 3).

PROG=${BATON_BUILD_DIR:?}/tests/mpi/baton_ckpt_prog
BATON=${BATON_BUILD_DIR:?}/cli/baton

run3() { "$REPO/tests/lib/mpirun-ranks" 3 "$PROG" "$@"; }

# A scratch directory per case (each case runs in its own subshell).
scratch() {
  SCRATCH=$(mktemp -d)
  trap 'rm -rf "$SCRATCH"' EXIT
}

# The program's result line (logging shares its output).
restored() { grep '^restored step=' <<<"$1" || true; }

test_a_version_that_kills_every_restore_is_quarantined() {
  local dir rc out
  scratch
  dir=$SCRATCH
  run3 "$dir/ck" save || fail "the save failed"
  for attempt in 1 2; do
    rc=0
    run3 "$dir/ck" restore-crash >"$dir/out" 2>&1 || rc=$?
    cat "$dir/out"
    [ "$rc" -ne 0 ] || fail "attempt $attempt: the restore did not die"
    grep -q "dying while reading" "$dir/out" || fail "attempt $attempt died elsewhere"
  done
  "$BATON" ckpt ls "$dir/ck"
  # The third start: step 2 is skipped untried, step 1 restores.
  out=$(run3 "$dir/ck" restore) || fail "the restore after two crashes failed: $out"
  echo "$out"
  expect_eq "$(restored "$out")" "restored step=1 fallbacks=0" "restore after two crashes while reading step 2"
  "$BATON" ckpt ls "$dir/ck" --json | /usr/bin/python3 -c '
import json, sys
v = {x["step"]: x for x in json.load(sys.stdin)}
assert v[2]["status"] == "quarantined" and v[2]["restore_failures"] == 2, v[2]
assert v[1]["status"] == "complete" and v[1]["restore_failures"] == 0, v[1]
' || fail "step 2 is not quarantined after two unfinished attempts"
}

# Issue 32, item 5: a preemption during a restore is not a failed restore.
# Every rank gets SIGTERM while about to read step 2 and goes on; a few
# heartbeat intervals later every rank still answers, so the attempt mark
# goes; then the process is killed (SIGKILL, as at the end of KillWait).
# Twice (max_restore_failures): step 2 is not quarantined and restores.
# (A crash that the launcher follows with SIGTERM to the others keeps the
# mark: test_a_version_that_kills_every_restore_is_quarantined.)
test_a_preemption_during_a_restore_is_not_counted() {
  local dir rc
  scratch
  dir=$SCRATCH
  run3 "$dir/ck" save || fail "the save failed"
  for attempt in 1 2; do
    rc=0
    run3 "$dir/ck" restore-preempted >"$dir/out" 2>&1 || rc=$?
    cat "$dir/out"
    [ "$rc" -ne 0 ] || fail "attempt $attempt: the restore was not killed"
    grep -q "SIGTERM while reading" "$dir/out" || fail "attempt $attempt was killed elsewhere"
    grep -q "^mark removed" "$dir/out" || fail "attempt $attempt: the attempt mark stayed after the stop signal"
  done
  "$BATON" ckpt ls "$dir/ck" --json | /usr/bin/python3 -c '
import json, sys
v = {x["step"]: x for x in json.load(sys.stdin)}
assert v[2]["status"] == "complete" and v[2]["restore_failures"] == 0, v[2]
' || fail "a preempted restore was counted toward the quarantine of step 2"
  out=$(run3 "$dir/ck" restore) || fail "the restore after two preemptions failed: $out"
  expect_eq "$(restored "$out")" "restored step=2 fallbacks=0" "restore after two preemptions while reading step 2"
}

test_a_restore_that_finishes_leaves_no_mark() {
  local dir out
  scratch
  dir=$SCRATCH
  run3 "$dir/ck" save || fail "the save failed"
  for attempt in 1 2 3; do
    out=$(run3 "$dir/ck" restore) || fail "restore $attempt failed: $out"
    expect_eq "$(restored "$out")" "restored step=2 fallbacks=0" "restore $attempt"
  done
  [ ! -e "$dir/ck/v00000002-s2/restore-failures" ] || fail "a finished restore left $(cat "$dir/ck/v00000002-s2/restore-failures")"
}

test_a_second_live_writer_is_refused_and_a_dead_ones_lock_is_free() {
  local dir holder pid out rc
  scratch
  dir=$SCRATCH
  run3 "$dir/ck" hold >"$dir/holder.out" 2>&1 &
  holder=$!
  # Wait (at most 60 s) for the holder's line: it holds the lock from then on.
  for _ in $(seq 600); do
    grep -q '^holding pid ' "$dir/holder.out" && break
    kill -0 "$holder" 2>/dev/null || { cat "$dir/holder.out"; fail "the holder ended"; }
    sleep 0.1
  done
  pid=$(sed -n 's/^holding pid //p' "$dir/holder.out")
  [ -n "$pid" ] || { cat "$dir/holder.out"; fail "the holder never held the directory"; }
  rc=0
  out=$(run3 "$dir/ck" restore 2>&1) || rc=$?
  echo "$out"
  [ "$rc" -ne 0 ] || fail "a second writer opened the directory"
  grep -q "has another live writer (.*locked by pid $pid on " <<<"$out" ||
    fail "the refusal does not name the holder (pid $pid)"
  # The holder dies (SIGKILL: no clean-up); the next job resumes at once.
  kill -9 "$pid"
  wait "$holder" || true
  out=$(run3 "$dir/ck" restore) || fail "the directory stayed locked after its writer died: $out"
  expect_eq "$(restored "$out")" "restored step=1 fallbacks=0" "the next job's restore"
  grep -q '^run_id [0-9a-f]\{32\}$' "$dir/ck/run" || fail "no run id in $dir/ck/run: $(cat "$dir/ck/run")"
}

# Issue 17: a rank killed inside its background write of step 2 (its shard
# written, not synced) ends the job; step 2 has no manifest and the next job
# restores step 1.
test_a_rank_killed_during_a_background_write_leaves_the_previous_version() {
  local dir rc out
  scratch
  dir=$SCRATCH
  rc=0
  run3 "$dir/ck" save-async-kill >"$dir/out" 2>&1 || rc=$?
  cat "$dir/out"
  [ "$rc" -ne 0 ] || fail "the job survived the death of a rank"
  grep -q "dying in the background write of .*-s2/shard-2.h5" "$dir/out" || fail "the rank died elsewhere"
  "$BATON" ckpt ls "$dir/ck"
  "$BATON" ckpt ls "$dir/ck" --json | /usr/bin/python3 -c '
import json, sys
v = {x["step"]: x for x in json.load(sys.stdin)}
assert v[1]["status"] == "complete", v
assert 2 not in v or v[2]["status"] == "incomplete", v[2]
' || fail "step 1 is not the newest complete version"
  out=$(run3 "$dir/ck" restore) || fail "the restore after the kill failed: $out"
  expect_eq "$(restored "$out")" "restored step=1 fallbacks=0" "restore after a rank died in its write of step 2"
}

# A version written asynchronously (one shard per rank, sec2) is read by the
# normal Restore, by baton ckpt verify, by h5dump and by h5py, and holds
# what SaveAsync copied, not what the program wrote after it returned.
test_an_async_version_reads_with_restore_verify_h5dump_and_h5py() {
  local dir out v
  scratch
  dir=$SCRATCH
  run3 "$dir/ck" save-async || fail "the asynchronous saves failed"
  out=$(run3 "$dir/ck" restore) || fail "the restore failed: $out"
  expect_eq "$(restored "$out")" "restored step=2 fallbacks=0" "restore of an asynchronous version"
  "$BATON" ckpt verify "$dir/ck" || fail "baton ckpt verify refused an asynchronous version"
  v=$(ls -d "$dir"/ck/v*-s2)
  for k in 0 1 2; do
    h5dump -H "$v/shard-$k.h5" >/dev/null || fail "h5dump cannot read $v/shard-$k.h5"
  done
  /usr/bin/python3 - "$v" <<'PY' || fail "h5py read other values than SaveAsync copied"
import sys, h5py, numpy as np
v = sys.argv[1]
rows = []
for k in range(3):
    with h5py.File(f"{v}/shard-{k}.h5", "r") as f:
        if "w" in f:
            d = f["w"]
            off = int(d.attrs["offset"])
            rows.append((off, d[...]))
w = np.concatenate([r for _, r in sorted(rows, key=lambda x: x[0])])
assert (w == 2000 + np.arange(64)).all(), w
PY
}

# Issue 32, item 10: the dtypes a Python program saves (bool, i8, i16, u16,
# u32, u64, f8e4m3, f8e5m2) round-trip through Save and Restore, and h5py
# reads each as the numpy type it is: bool as numpy's bool_ (h5py's enum),
# the integers as themselves, the 8-bit floats as their bits (uint8) with a
# "dtype" attribute naming the format; their bits decode (by an independent
# decoder here) to the values the program saved.
test_every_newer_dtype_round_trips_and_reads_with_h5py() {
  local dir v
  scratch
  dir=$SCRATCH
  run3 "$dir/ck" save-dtypes || fail "the save or the round trip of the newer dtypes failed"
  "$BATON" ckpt verify "$dir/ck" || fail "baton ckpt verify refused the newer dtypes"
  "$BATON" ckpt inspect "$dir/ck" | grep -q "^t_f8e4m3  *f8e4m3  *replicated  *\[8\]" ||
    fail "inspect does not show t_f8e4m3 as f8e4m3: $("$BATON" ckpt inspect "$dir/ck")"
  v=$(ls -d "$dir"/ck/v*-s1)
  /usr/bin/python3 - "$v" <<'PY' || fail "h5py read other types or values than were saved"
import sys, glob, h5py, numpy as np
v = sys.argv[1]
got = {}
for path in sorted(glob.glob(f"{v}/shard-*.h5")):
    with h5py.File(path, "r") as f:
        for name in f:
            if name.startswith("t_"):
                d = f[name]
                got.setdefault(name, []).append((int(d.attrs["offset"]), d[...], d.attrs["dtype"]))
def whole(name):
    parts = sorted(got[name], key=lambda p: p[0])
    return np.concatenate([p[1] for p in parts]), parts[0][2]
want = {
    "t_bool": (np.bool_, [True, False, True, True, False, False, True, False]),
    "t_i8": (np.int8, [-128, -1, 0, 1, 127, 42, -42, 7]),
    "t_i16": (np.int16, [-32768, -1, 0, 1, 32767, 1000, -1000, 7]),
    "t_u16": (np.uint16, [0, 1, 255, 256, 65535, 1000, 32768, 7]),
    "t_u32": (np.uint32, [0, 1, 65536, 4294967295, 2147483648, 1000, 123456789, 7]),
    "t_u64": (np.uint64, [0, 1, 4294967296, 18446744073709551615, 9223372036854775808, 1000, 123456789012345, 7]),
}
for name, (dt, values) in want.items():
    a, attr = whole(name)
    assert a.dtype == np.dtype(dt), (name, a.dtype)
    assert (a == np.array(values, dtype=dt)).all(), (name, a)
    assert attr in (name[2:], name[2:].encode()), (name, attr)
def decode(bits, mbits, bias, fn):
    out = []
    for b in bits.tolist():
        sign = -1.0 if b & 0x80 else 1.0
        e, m = (b >> mbits) & ((1 << (7 - mbits)) - 1), b & ((1 << mbits) - 1)
        emax = (1 << (7 - mbits)) - 1
        if (fn and e == emax and m == (1 << mbits) - 1) or (not fn and e == emax):
            out.append(float("nan"))
        elif e == 0:
            out.append(sign * m * 2.0 ** (1 - bias - mbits))
        else:
            out.append(sign * (1 + m / 2.0 ** mbits) * 2.0 ** (e - bias))
    return out
for name, mbits, bias, fn, values in (
        ("t_f8e4m3", 3, 7, True, [0, 1, -2, 0.5, 448, -448, 2 ** -6, 2 ** -9]),
        ("t_f8e5m2", 2, 15, False, [0, 1, -2, 0.5, 57344, -57344, 2 ** -14, 2 ** -16])):
    a, attr = whole(name)
    assert a.dtype == np.uint8, (name, a.dtype)
    assert attr in (name[2:], name[2:].encode()), (name, attr)
    assert decode(a, mbits, bias, fn) == values, (name, a, decode(a, mbits, bias, fn))
print("h5py read", len(got), "arrays of the newer dtypes")
PY
}

# as_user COMMAND...: runs COMMAND as an ordinary user: as nobody through
# setpriv when this runs as root (root ignores permission bits, so a denied
# directory denies nothing), else as the current user.
as_user() {
  if [ "$(id -u)" -eq 0 ]; then
    setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"
  else
    "$@"
  fi
}

# A checkpoint directory the job may not write (EACCES: a wrong mode, a
# directory of another user): the save fails with an error that names the
# directory and the cause, no rank crashes, and every committed version is
# still there and restores bit for bit once the directory is writable again.
test_a_checkpoint_directory_without_write_permission_fails_clearly() {
  local dir ck rc out
  scratch
  dir=$SCRATCH
  chmod 755 "$dir"
  mkdir "$dir/ck" "$dir/home"
  [ "$(id -u)" -ne 0 ] || chown nobody:nogroup "$dir/ck" "$dir/home"
  ck=$dir/ck
  echo "the job runs as $(as_user id -un)"
  # Open MPI's session directory and the user's home: places the user may write.
  export TMPDIR=$dir/home HOME=$dir/home
  as_user "$REPO/tests/lib/mpirun-ranks" 3 "$PROG" "$ck" save || fail "the save as $(as_user id -un) failed"
  chmod a-w "$ck"
  rc=0
  out=$(as_user "$REPO/tests/lib/mpirun-ranks" 3 "$PROG" "$ck" save-more 2>&1) || rc=$?
  echo "$out"
  expect_eq "$rc" 1 "exit status of a save into a directory without write permission (1: an error, not a crash)"
  grep -q "$ck" <<<"$out" || fail "the error does not name $ck"
  grep -q "Permission denied" <<<"$out" || fail "the error does not say 'Permission denied'"
  out=$(as_user "$BATON" ckpt ls "$ck" --json) || fail "baton ckpt ls of the read-only directory failed: $out"
  expect_eq "$(/usr/bin/python3 -c 'import json, sys; print(sorted(v["step"] for v in json.load(sys.stdin)))' <<<"$out")" \
    "[1, 2]" "committed steps after the refused save"
  chmod u+w "$ck"
  out=$(as_user "$REPO/tests/lib/mpirun-ranks" 3 "$PROG" "$ck" restore) || fail "the restore failed: $out"
  expect_eq "$(restored "$out")" "restored step=2 fallbacks=0" "restore once the directory is writable again"
}
