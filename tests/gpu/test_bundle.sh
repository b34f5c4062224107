# shellcheck shell=bash
# Shell cases for the GPU bundle (tests/gpu/run-gpu-tests --bundle), run by
# tests/gpu/bundle.sh through tests/lib/run-cases: the GPU tests are built
# here, without a GPU, exactly as they are carried to a GPU machine, so that
# a change that breaks their MPI-free build fails here and not on the one
# GPU run a task may get.

RUN_GPU_TESTS=$REPO/tests/gpu/run-gpu-tests
# Built once by the first case, used by the second (a build is ~25 s here).
BUNDLE=$BATON_TEST_RESULTS/gpu-bundle.d

# The cases below run the bundle where no GPU is (with one, tests/gpu/gpu.sh
# runs it for real): a SKIP line and 1 otherwise.
no_gpu_here() {
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "SKIP: a GPU is visible here: tests/gpu/gpu.sh runs the bundle for real"
    return 1
  fi
}
# The bundle the first case built, or a new one when that case did not run.
have_bundle() {
  [ -x "$BUNDLE/nccl_bench" ] || bash "$RUN_GPU_TESTS" --bundle "$BUNDLE" > /dev/null 2>&1 || fail "--bundle failed"
}

test_bundle_builds_small_and_self_contained() {
  rm -rf "$BUNDLE"
  bash "$RUN_GPU_TESTS" --bundle "$BUNDLE" > "$BUNDLE.log" 2>&1 || { cat "$BUNDLE.log"; fail "--bundle failed"; }
  for b in nccl_gpu_test nccl_bench run-gpu-tests; do
    [ -x "$BUNDLE/$b" ] || fail "the bundle has no $b"
  done
  local kib; kib=$(du -sk "$BUNDLE" | cut -f1)
  [ "$kib" -lt $((64 * 1024)) ] || fail "the bundle is $kib KiB, over the 64 MiB a device run may carry"
  # Nothing from MPI, Boost or HDF5 (the GPU machine has none of them);
  # libstdc++ is the system's, which libnccl needs anyway.
  if ldd "$BUNDLE/nccl_gpu_test" "$BUNDLE/nccl_bench" | grep -E 'libmpi|libboost|libhdf5|libslurm'; then
    fail "the bundle's programs need MPI, Boost, HDF5 or libslurm"
  fi
}

# Without a GPU both programs say so and exit 77.
test_prebuilt_bundle_skips_without_a_gpu_saying_why() {
  no_gpu_here || return 77
  local dir rc=0; dir=$(mktemp -d)
  have_bundle
  "$BUNDLE/run-gpu-tests" --prebuilt "$BUNDLE" > "$dir/out" 2>&1 || rc=$?
  expect_eq "$rc" 77 "exit status of the prebuilt bundle without a GPU"
  tail -n 1 "$dir/out" | grep -q '^SKIP: no GPU visible (.' || fail "no SKIP line with a reason: $(cat "$dir/out")"
  rc=0
  "$BUNDLE/nccl_bench" > "$dir/out" 2>&1 || rc=$?
  expect_eq "$rc" 77 "exit status of nccl_bench without a GPU"
  rc=0
  "$BUNDLE/nccl_bench" -e 12Q > "$dir/out" 2>&1 || rc=$?
  expect_eq "$rc" 2 "exit status of nccl_bench -e 12Q"
  grep -q "\-e: invalid value '12Q'" "$dir/out" || fail "the error does not name -e 12Q: $(cat "$dir/out")"
  rm -rf "$dir"
}

# Issue 31, item 10: where nvidia-smi lists a GPU a skip is a failure. A
# stand-in nvidia-smi lists one here, where CUDA finds none: the prebuilt
# bundle must fail, naming the skip, not exit 77.
test_prebuilt_bundle_fails_instead_of_skipping_where_a_gpu_is_listed() {
  no_gpu_here || return 77
  local dir rc=0; dir=$(mktemp -d)
  have_bundle
  mkdir "$dir/bin"
  printf '#!/bin/sh\necho "GPU 0: Stand-in GPU (UUID: GPU-00000000-0000-0000-0000-000000000000)"\n' > "$dir/bin/nvidia-smi"
  chmod +x "$dir/bin/nvidia-smi"
  PATH="$dir/bin:$PATH" "$BUNDLE/run-gpu-tests" --prebuilt "$BUNDLE" > "$dir/out" 2>&1 || rc=$?
  cat "$dir/out"
  expect_eq "$rc" 1 "exit status of the prebuilt bundle where nvidia-smi lists a GPU that CUDA does not see"
  grep -q '^FAIL: a GPU is listed (nvidia-smi -L) but nccl_gpu_test skipped' "$dir/out" ||
    fail "no FAIL line naming the skip"
  rm -rf "$dir"
}
