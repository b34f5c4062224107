#!/bin/sh
# The GPU tests (tests/gpu/run-gpu-tests: the nccl backend on a real GPU) as
# one make check entry, label "gpu", one result row:
#   PASS   run-gpu-tests exited 0
#   SKIP   it exited 77, or no GPU is visible; the detail says why
#   FAIL   anything else (a timeout too: then only the EXIT row says so)
# Without a GPU nothing is built: a cheap probe (nvidia-smi -L, /dev/nvidia*)
# decides first, so make check does not spend a minute compiling a test it
# cannot run. Exits 77 on a skip, so automake reports SKIP as well.
# BATON_GPU_BUNDLE=DIR runs a prebuilt bundle (run-gpu-tests --bundle DIR).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
label=gpu
rows="$BATON_TEST_RESULTS/$label.tsv"

if [ "${1:-}" = --inner ]; then
  row() { printf '%s\t%s\t%s\t%s\n' "$1" "$label" run-gpu-tests "$2" >> "$rows"; }
  reason=
  if command -v nvidia-smi >/dev/null 2>&1; then
    listed=$(timeout 30 nvidia-smi -L 2>&1 | head -n 1)
    case $listed in
      GPU\ *) ;;
      *) reason="nvidia-smi -L: ${listed:-no output}" ;;
    esac
  elif ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
    :  # a device node without nvidia-smi: let run-gpu-tests decide
  else
    reason="nvidia-smi not found, no /dev/nvidia0"
  fi
  if [ -n "$reason" ] && [ -z "${BATON_GPU_BUNDLE:-}" ]; then
    echo "SKIP: no GPU visible ($reason); the GPU test was not built"
    row SKIP "no GPU visible ($reason); the GPU test was not built"
    exit 0
  fi
  out=$(mktemp)
  rc=0
  if [ -n "${BATON_GPU_BUNDLE:-}" ]; then
    bash "${srcdir:?set by make check}/tests/gpu/run-gpu-tests" --prebuilt "$BATON_GPU_BUNDLE" >"$out" 2>&1 || rc=$?
  else
    bash "${srcdir:?set by make check}/tests/gpu/run-gpu-tests" >"$out" 2>&1 || rc=$?
  fi
  cat "$out"
  case $rc in
    0) row PASS "" ;;
    77) row SKIP "$(tail -n 1 "$out" | tr '\t' ' ')" ;;
    *) row FAIL "exit $rc: $(tail -n 3 "$out" | tr '\t\n' '  ')" ;;
  esac
  rm -f "$out"
  [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ]
  exit $?
fi

rc=0
run_suite "$label" 600 sh "${srcdir:?set by make check}/tests/gpu/gpu.sh" --inner || rc=$?
if [ "$rc" -eq 0 ] && [ "$(cut -f1 "$rows" 2>/dev/null | head -n 1)" = SKIP ]; then
  exit 77
fi
exit "$rc"
