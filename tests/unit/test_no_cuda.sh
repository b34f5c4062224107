# shellcheck shell=bash
# Shell cases: libbaton.so names no CUDA or NCCL library and loads without
# them; the nccl backend dlopen()s them and names what is missing (run by
# tests/unit/no-cuda.sh through tests/lib/run-cases).
#
# "Without CUDA" is made real with a private mount namespace (unshare -m):
# a tmpfs over the CUDA toolkit's folder hides every file under it, the
# ld.so.cache entries into it included, for the programs run inside only.

B=${BATON_BUILD_DIR:?}
LIB=$B/.libs/libbaton.so

# The folder /usr/local/cuda points at (a tmpfs must cover the real one).
cuda_dir() { readlink -f /usr/local/cuda; }

# hidden CMD...: CMD in a mount namespace where the CUDA toolkit's folder is
# an empty tmpfs. 77 (SKIP) from the caller when no namespace can be made.
can_hide() {
  [ -d /usr/local/cuda ] || { echo "SKIP: no /usr/local/cuda here to hide"; return 1; }
  unshare -m true 2>/dev/null || { echo "SKIP: cannot make a mount namespace (unshare -m: needs root or user namespaces)"; return 1; }
}
hidden() {
  # shellcheck disable=SC2016 # $0 and $@ expand in the inner shell
  unshare -m sh -c 'mount -t tmpfs none "$0" && exec "$@"' "$(cuda_dir)" "$@"
}

test_libbaton_needs_no_cuda_or_nccl_library() {
  [ -f "$LIB" ] || fail "no $LIB"
  local dyn; dyn=$(readelf -d "$LIB") || fail "readelf -d $LIB failed"
  echo "$dyn" | grep -E 'NEEDED|RUNPATH|RPATH'
  if echo "$dyn" | grep NEEDED | grep -Ei 'libnccl|libcudart|libcuda\.'; then
    fail "libbaton.so lists a CUDA or NCCL library as NEEDED"
  fi
  if echo "$dyn" | grep -E 'RUNPATH|RPATH' | grep -i cuda; then
    fail "libbaton.so has a run path into CUDA"
  fi
  # The programs neither (else they would not start without CUDA either).
  local p
  for p in "$B/cli/.libs/baton" "$B/examples/.libs/baton-train"; do
    [ -f "$p" ] || continue
    if readelf -d "$p" | grep NEEDED | grep -Ei 'libnccl|libcudart'; then fail "$p lists CUDA or NCCL as NEEDED"; fi
  done
}

test_baton_and_baton_train_start_with_cuda_hidden() {
  can_hide || return 77
  local out rc=0
  # Hidden indeed: the library is gone for the namespace's programs.
  out=$(hidden sh -c 'ls /usr/local/cuda/lib64/ 2>&1; ldconfig -p | grep -c libnccl' 2>&1) || true
  echo "$out"
  ! echo "$out" | grep -q 'libnccl.so' || fail "the tmpfs does not hide /usr/local/cuda"
  out=$(hidden "$B/cli/baton" --help 2>&1) || rc=$?
  echo "$out" | head -n 5
  expect_eq "$rc" 0 "exit status of baton --help with CUDA hidden"
  ! echo "$out" | grep -q 'error while loading shared libraries' || fail "baton did not load"
  rc=0
  out=$(hidden "$B/examples/baton-train" --help 2>&1) || rc=$?
  echo "$out" | head -n 5
  expect_eq "$rc" 0 "exit status of baton-train --help with CUDA hidden"
  ! echo "$out" | grep -q 'error while loading shared libraries' || fail "baton-train did not load"
}

# A program that asks for the nccl backend, alone (Open MPI's singleton):
# the mpi backend works, the nccl one fails with Unavailable naming the
# library and the paths tried; nothing aborts.
test_nccl_backend_without_the_libraries_names_what_is_missing() {
  can_hide || return 77
  local out rc=0
  out=$(hidden timeout -k 10 120 "$B/cli/baton" bench collectives --backend nccl -b 8 -e 8 -n 1 -w 0 2>&1) || rc=$?
  echo "$out"
  [ "$rc" -ne 0 ] || fail "the nccl backend without CUDA succeeded"
  [ "$rc" -lt 124 ] || fail "exit $rc: killed, not an error"
  echo "$out" | grep -q 'backend nccl: cannot load the CUDA runtime (libcudart.so.[0-9]*); tried .*libcudart.so.[0-9]*: not found' ||
    fail "no error naming the missing CUDA runtime and the paths tried"
  echo "$out" | grep -q 'BATON_NCCL_LIBRARY_PATH' || fail "the error does not say how to name a directory"
  rc=0
  out=$(hidden timeout -k 10 120 "$B/cli/baton" bench collectives --backend mpi -b 8 -e 8 -n 1 -w 0 2>&1) || rc=$?
  echo "$out" | tail -n 3
  expect_eq "$rc" 0 "exit status of the mpi backend with CUDA hidden"
}

# CUDA's runtime there, NCCL not (a file that is no library stands in its
# place): the error names NCCL; BATON_NCCL_LIBRARY_PATH naming a folder
# that holds NCCL as NVIDIA's wheel lays it out (nvidia/nccl/lib) finds it.
test_nccl_missing_then_found_in_a_named_wheel_folder() {
  can_hide || return 77
  local nccl out rc=0 site
  nccl=$(ldconfig -p | awk '/libnccl.so.2 / && !found { print $NF; found = 1 }')
  [ -n "$nccl" ] || nccl=$(cuda_dir)/lib/libnccl.so.2
  [ -f "$nccl" ] || { echo "SKIP: no libnccl.so.2 here"; return 77; }
  nccl=$(readlink -f "$nccl")
  site=$(mktemp -d)
  mkdir -p "$site/nvidia/nccl/lib"
  cp "$nccl" "$site/nvidia/nccl/lib/libnccl.so.2"
  # Every libnccl.so* of the toolkit replaced by an empty file.
  local binds="" f
  for f in "$(dirname "$nccl")"/libnccl.so*; do binds="$binds mount --bind /dev/null '$f' &&"; done
  out=$(unshare -m sh -c "$binds"' exec "$@"' sh timeout -k 10 120 "$B/cli/baton" bench collectives --backend nccl -b 8 -e 8 -n 1 -w 0 2>&1) || rc=$?
  echo "$out"
  if [ "$rc" -eq 0 ] || [ "$rc" -ge 124 ]; then fail "exit $rc without NCCL (want an error, not success or a kill)"; fi
  echo "$out" | grep -q 'backend nccl: cannot load NCCL (libnccl.so.2); tried ' || fail "no error naming NCCL"
  rc=0
  out=$(BATON_NCCL_LIBRARY_PATH=$site unshare -m sh -c "$binds"' exec "$@"' sh timeout -k 10 120 "$B/cli/baton" bench collectives --backend nccl -b 8 -e 8 -n 1 -w 0 2>&1) || rc=$?
  echo "$out"
  # Loaded: what fails now is the absent GPU, not the library.
  ! echo "$out" | grep -q 'cannot load' || fail "NCCL in $site/nvidia/nccl/lib was not found"
  echo "$out" | grep -q 'no CUDA device visible' || fail "with NCCL found, the error is not the missing GPU"
  rm -rf "$site"
}

# configure's side of item 9: m4/baton_nccl.m4 alone, in a configure made
# here from a seven-line configure.ac (a few seconds: not the project's
# whole configure). probe_configure DIR makes DIR/configure; SKIP without
# aclocal or autoconf.
probe_configure() {
  if ! command -v aclocal >/dev/null 2>&1 || ! command -v autoconf >/dev/null 2>&1; then
    echo "SKIP: no aclocal/autoconf here to make the probe's configure"
    return 1
  fi
  cat > "$1/configure.ac" <<'EOF'
AC_INIT([nccl-probe], [0])
AC_PROG_CC
AC_PROG_CXX
AC_LANG([C++])
BATON_CHECK_NCCL
AC_MSG_NOTICE([summary: nccl: $baton_summary_nccl])
AC_OUTPUT
EOF
  (cd "$1" && aclocal -I "$REPO/m4" && autoconf) || fail "the probe's configure could not be made"
}

# A CUDA runtime older than 12.5 (no cudaGetDriverEntryPointByVersion): a
# stand-in toolkit whose header says 12.4 and whose libcudart links.
test_configure_builds_no_nccl_backend_below_cuda_12_5() {
  local dir out rc=0; dir=$(mktemp -d)
  probe_configure "$dir" || return 77
  mkdir -p "$dir/cuda/include" "$dir/cuda/lib64"
  cat > "$dir/cuda/include/cuda_runtime_api.h" <<'EOF'
#pragma once
#define CUDART_VERSION 12040
typedef enum cudaError { cudaSuccess = 0 } cudaError_t;
#ifdef __cplusplus
extern "C"
#endif
cudaError_t cudaGetDeviceCount(int* count);
EOF
  printf 'int cudaGetDeviceCount(int* n) { *n = 0; return 0; }\n' > "$dir/stub.c"
  ${CC:-gcc} -shared -fPIC -o "$dir/cuda/lib64/libcudart.so" "$dir/stub.c" || fail "the stand-in libcudart did not build"
  out=$(cd "$dir" && ./configure --with-cuda="$dir/cuda" 2>&1) || fail "configure failed with NCCL on auto: $out"
  echo "$out" | tail -n 3
  echo "$out" | grep -qF "summary: nccl: no (NCCL backend not built: the CUDA runtime ($dir/cuda) is 12.4, the backend needs CUDA >= 12.5" ||
    fail "configure did not say the NCCL backend is not built for CUDA 12.4"
  out=$(cd "$dir" && ./configure --with-cuda="$dir/cuda" --with-nccl=yes 2>&1) || rc=$?
  echo "$out" | tail -n 1
  [ "$rc" -ne 0 ] || fail "--with-nccl=yes with CUDA 12.4 did not fail"
  echo "$out" | grep -q 'error: NCCL was requested (--with-nccl=yes) but NCCL backend not built: .* is 12\.4' ||
    fail "the error does not say why"
  rm -rf "$dir"
}

# NVIDIA's wheel: site-packages/nvidia/nccl/{include/nccl.h,lib/libnccl.so.2},
# with no unversioned libnccl.so; --with-nccl names the site-packages.
test_configure_finds_nccl_in_a_wheel_with_only_a_versioned_library() {
  local dir out header; dir=$(mktemp -d)
  header=$(readlink -f /usr/local/cuda)/include/nccl.h
  [ -f "$header" ] || { echo "SKIP: no nccl.h under /usr/local/cuda to lay out as a wheel"; return 77; }
  probe_configure "$dir" || return 77
  mkdir -p "$dir/site/nvidia/nccl/include" "$dir/site/nvidia/nccl/lib"
  cp "$header" "$dir/site/nvidia/nccl/include/"
  : > "$dir/site/nvidia/nccl/lib/libnccl.so.2"  # configure only looks for it: nothing links NCCL
  out=$(cd "$dir" && ./configure --with-nccl="$dir/site" 2>&1) || fail "configure failed: $out"
  echo "$out" | tail -n 3
  echo "$out" | grep -q "summary: nccl: NCCL 2\.[0-9]*\.[0-9]* ($dir/site/nvidia/nccl/include/nccl.h, $dir/site/nvidia/nccl/lib)" ||
    fail "configure did not find NCCL in the wheel's layout"
  rm -rf "$dir"
}
