#!/bin/sh
# The Python examples under mpirun (2 ranks, gloo, CPU), as a user without
# Slurm runs them: examples/train_ddp.py resumes bit for bit and writes the
# step records `baton report` reads; a bug exits 1 and is recorded as one; a
# dead peer makes its survivor exit 75; examples/train_lightning.py resumes
# bit for bit from an epoch-end checkpoint; examples/train_fsdp.py (FSDP2)
# resumes bit for bit and at another world size. (On the local cluster:
# tests/cluster/test_torch.sh.)
. "${srcdir:?set by make check}/tests/lib/suite.sh"
label="python-examples"
rows=$BATON_TEST_RESULTS/$label.tsv
rm -f "$rows"
if [ ! -e "$BATON_BUILD_DIR/python/baton/_baton.so" ]; then
  printf 'SKIP\t%s\t%s (not built)\tbuilt without the Python extension: %s\n' "$label" "$label" \
    "${BATON_PYTHON_SUMMARY:-no Python}" >>"$rows"
  exit 0
fi
python=${BATON_PYTHON:-/usr/bin/python3}
if ! "$python" -c 'import torch' 2>/dev/null; then
  printf 'SKIP\t%s\t%s (no torch)\t%s cannot import torch (scripts/install-deps --with-torch)\n' "$label" "$label" \
    "$python" >>"$rows"
  exit 0
fi
base=$(mktemp -d "${TMPDIR:-/tmp}/baton-pyexamples-XXXXXX") || exit 1
trap 'rm -rf "$base"' EXIT
PYTHONPATH=$BATON_BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}
PYTHONDONTWRITEBYTECODE=1
BATON_COLLECTIVE_TIMEOUT=${BATON_COLLECTIVE_TIMEOUT:-60}
export PYTHONPATH PYTHONDONTWRITEBYTECODE BATON_COLLECTIVE_TIMEOUT
ex=$srcdir/examples
baton_cli=$BATON_BUILD_DIR/cli/baton

# row STATUS NAME DETAIL
row() { printf '%s\t%s\t%s\t%s\n' "$1" "$label" "$2" "$3" >>"$rows"; }
# ddp NAME ARGS...: train_ddp.py under mpirun with 2 ranks; output in $base/NAME.out
ddp() {
  _n=$1
  shift
  timeout --kill-after=10 240 "$srcdir/tests/lib/mpirun-ranks" 2 "$python" "$ex/train_ddp.py" --samples 1024 \
    --hidden 32 "$@" >>"$base/$_n.out" 2>&1
}
# checksum FILE: the last launch's final checksum, once per rank (by occurrence, not by line:
# mpirun forwards each rank's output in pieces, and two ranks' lines can meet on one line,
# as "step=24 final_checksum=f865..step=24 final_checksum=f865..", seen once in 4 runs)
# (a checksum is 64 hex digits: the 'f' of a following "final_checksum" is one too)
# The lines of a launch of 2 ranks are looked for anywhere in a line, not at its start, for the same reason.
checksum() { grep -o 'final_checksum=[0-9a-f]\{64\}' "$1" | tail -n 2 | sed 's/^final_checksum=//' | sort -u; }

# 1. An uninterrupted run, and one stopped at step 10 and run again to 20.
ddp whole --steps 20 --ckpt-every 5 --ckpt-dir "$base/whole"
ddp parts --steps 10 --ckpt-every 5 --ckpt-dir "$base/parts"
ddp parts --steps 20 --ckpt-every 5 --ckpt-dir "$base/parts"
a=$(checksum "$base/whole.out") b=$(checksum "$base/parts.out")
if [ -n "$a" ] && [ "$(checksum "$base/whole.out" | wc -l)" = 1 ] && [ "$a" = "$b" ] &&
  grep -q 'resumed from step 10 ' "$base/parts.out"; then
  row PASS "ddp: resumed at step 10, final checksum equal to the uninterrupted run's" "$a"
else
  row FAIL "ddp: resumed at step 10, final checksum equal to the uninterrupted run's" \
    "uninterrupted '$a', resumed '$b'; see $base/parts.out"
  cat "$base/whole.out" "$base/parts.out"
fi
"$baton_cli" report "$base/parts" >"$base/report.out" 2>&1
if grep -q '20 distinct steps, 1 to 20' "$base/report.out" && grep -q 'restored step 10' "$base/report.out"; then
  row PASS "ddp: baton report reads the step records" ""
else
  row FAIL "ddp: baton report reads the step records" "$(tr '\n' ' ' <"$base/report.out" | cut -c1-300)"
  cat "$base/report.out"
fi

# 1b. The same directory at another world size (a restart on fewer nodes): 1 rank goes on to 25.
timeout --kill-after=10 240 "$srcdir/tests/lib/mpirun-ranks" 1 "$python" "$ex/train_ddp.py" --samples 1024 \
  --hidden 32 --steps 25 --ckpt-every 5 --ckpt-dir "$base/parts" >"$base/shrink.out" 2>&1
if grep -q '^resumed from step 20 ' "$base/shrink.out" && grep -q '^final_checksum=' "$base/shrink.out" &&
  "$baton_cli" report "$base/parts" 2>&1 | grep -q '1 ranks\{0,1\}, restored step 20'; then
  row PASS "ddp: resumed at another world size (2 ranks -> 1)" ""
else
  row FAIL "ddp: resumed at another world size (2 ranks -> 1)" "see $base/shrink.out"
  cat "$base/shrink.out"
  "$baton_cli" report "$base/parts"
fi

# 2. A bug on one rank: exit 1 (baton's excepthook), recorded as uncaught (its kind) in the event log.
rc=0
ddp bug --steps 20 --ckpt-every 5 --ckpt-dir "$base/bug" --inject bug@7 || rc=$?
# The traceback is on the job's output too, each line "[rank1]: ", although
# torch's init_process_group wrapped the hook (baton writes to the process's
# own stderr, not the buffer torch's wrapper swaps in).
if [ "$rc" = 1 ] && cat "$base/bug/events/"*.jsonl | grep -q '"what":"uncaught ZeroDivisionError on rank 1.*"kind":"uncaught"' &&
  grep -q '^\[rank1\]: Traceback (most recent call last):' "$base/bug.out" &&
  grep -q '^\[rank1\]: ZeroDivisionError' "$base/bug.out"; then
  row PASS "ddp: a bug exits 1 and is recorded as a bug" ""
else
  row FAIL "ddp: a bug exits 1 and is recorded as a bug" "mpirun exit $rc; see $base/bug.out"
  cat "$base/bug.out"
fi

# 3. A peer dies (SIGKILL): its survivor names the lost peer and exits 75.
ddp die --steps 20 --ckpt-every 5 --ckpt-dir "$base/die" --inject die@7 || true
if grep -q "exiting 75 to be relaunched or requeued" "$base/die.out" &&
  ! cat "$base/die/events/"*.jsonl | grep -q '"what":"uncaught'; then
  row PASS "ddp: the survivor of a dead peer exits 75" "$(grep -o 'train_ddp.py: [^;]*' "$base/die.out" | head -n 1 | cut -c1-200)"
else
  row FAIL "ddp: the survivor of a dead peer exits 75" "see $base/die.out"
  cat "$base/die.out"
fi

# 4. train_lightning.py: 3 epochs uninterrupted, and 1 epoch then resumed to 3.
if ! "$python" -c 'import lightning' 2>/dev/null; then
  row SKIP "lightning: resumed at an epoch's end, final checksum equal" "$python cannot import lightning"
else
  lightning() {
    _n=$1
    shift
    timeout --kill-after=10 240 "$srcdir/tests/lib/mpirun-ranks" 2 "$python" "$ex/train_lightning.py" \
      --samples 512 --hidden 32 "$@" >>"$base/$_n.out" 2>&1
  }
  lightning lwhole --epochs 3 --ckpt-dir "$base/lwhole"
  lightning lparts --epochs 1 --ckpt-dir "$base/lparts"
  lightning lparts --epochs 3 --ckpt-dir "$base/lparts"
  a=$(checksum "$base/lwhole.out") b=$(checksum "$base/lparts.out")
  if [ -n "$a" ] && [ "$(echo "$a" | wc -l)" = 1 ] && [ "$a" = "$b" ] &&
    grep -q "resuming from $base/lparts " "$base/lparts.out" && grep -q 'step=24 ' "$base/lparts.out"; then
    row PASS "lightning: resumed at an epoch's end, final checksum equal" "$a"
  else
    row FAIL "lightning: resumed at an epoch's end, final checksum equal" "uninterrupted '$a', resumed '$b'"
    cat "$base/lwhole.out" "$base/lparts.out"
  fi
fi

# 5. train_fsdp.py (FSDP2, DTensor state through DCP with baton's storage):
# uninterrupted to 12, and stopped at 6 (exit 75) then resumed, checksums equal; then the
# same directory at 1 rank (the DTensors resharded) goes on to 16.
fsdp() {
  _n=$1 _ranks=$2
  shift 2
  timeout --kill-after=10 240 "$srcdir/tests/lib/mpirun-ranks" "$_ranks" "$python" "$ex/train_fsdp.py" \
    --samples 256 --dim 32 --layers 1 --seq 16 --ckpt-every 3 "$@" >>"$base/$_n.out" 2>&1
}
fsdp fwhole 2 --steps 12 --ckpt-dir "$base/fwhole"
fsdp fparts 2 --steps 12 --stop-at 6 --ckpt-dir "$base/fparts"
fsdp fparts 2 --steps 12 --ckpt-dir "$base/fparts"
a=$(checksum "$base/fwhole.out") b=$(checksum "$base/fparts.out")
if [ -n "$a" ] && [ "$(echo "$a" | wc -l)" = 1 ] && [ "$a" = "$b" ] &&
  grep -q 'resumed from step 6 ' "$base/fparts.out"; then
  row PASS "fsdp: resumed at step 6, final checksum equal to the uninterrupted run's" "$a"
else
  row FAIL "fsdp: resumed at step 6, final checksum equal to the uninterrupted run's" \
    "uninterrupted '$a', resumed '$b'; see $base/fparts.out"
  cat "$base/fwhole.out" "$base/fparts.out"
fi
fsdp fshrink 1 --steps 16 --ckpt-dir "$base/fparts"
if grep -q '^resumed from step 12 (restart [0-9]*, 1 ranks)' "$base/fshrink.out" &&
  grep -q '^step=16 ' "$base/fshrink.out" && grep -q '^final_checksum=' "$base/fshrink.out"; then
  row PASS "fsdp: resumed at another world size (2 ranks -> 1), the DTensors resharded" ""
else
  row FAIL "fsdp: resumed at another world size (2 ranks -> 1), the DTensors resharded" "see $base/fshrink.out"
  cat "$base/fshrink.out"
fi

# A FAIL row fails the suite.
! grep -q '^FAIL' "$rows"
