# shellcheck shell=bash
# Cases for tests/unit/api-misuse.sh (make check): misuses of the public API
# that must not compile. Each case compiles a small program against
# include/ with the project's compiler and warning flags and checks both
# that the misuse is refused and that the same program without it builds
# (so a missing header or flag cannot make the case pass).
CXX_CMD=${CXX:-g++}
INCLUDE="$REPO/include"

# compile FILE: -fsyntax-only with -Werror, as the project builds.
compile() {
  # shellcheck disable=SC2086
  $CXX_CMD -std=c++17 -fsyntax-only -Wall -Wextra -Werror -I"$INCLUDE" "$1"
}

# A scratch directory per case (each case runs in its own subshell).
scratch() {
  SCRATCH=$(mktemp -d)
  trap 'rm -rf "$SCRATCH"' EXIT
}

test_an_ignored_status_does_not_compile() {
  scratch
  local dir=$SCRATCH
  cat >"$dir/ignored.cc" <<'CC'
#include "baton/status.h"
baton::Status Save() { return baton::Status::IOError("ckpt", "disk full"); }
int main() {
  Save();  // a dropped failure
  return 0;
}
CC
  cat >"$dir/handled.cc" <<'CC'
#include "baton/status.h"
baton::Status Save() { return baton::Status::IOError("ckpt", "disk full"); }
int main() {
  if (!Save().ok()) return 1;
  Save().IgnoreError();  // dropped on purpose, said so
  return 0;
}
CC
  compile "$dir/handled.cc" || fail "the handled program does not compile"
  if compile "$dir/ignored.cc" 2>"$dir/err"; then fail "a dropped Status compiles"; fi
  cat "$dir/err"
  grep -q "nodiscard" "$dir/err" || fail "refused, but not for [[nodiscard]]"
}

# checkpointer.h includes runtime.h, which names MPI types (without the
# deprecated C++ bindings, as the project builds).
mpi_flags() {
  echo "-DOMPI_SKIP_MPICXX=1 $(mpicxx --showme:compile)" || fail "no mpicxx --showme:compile for the MPI include flags"
}

test_a_const_array_cannot_be_registered() {
  scratch
  local dir=$SCRATCH flags
  flags=$(mpi_flags)
  for constness in "" const; do
    cat >"$dir/register_$constness.cc" <<CC
#include "baton/checkpointer.h"
baton::Status Register(baton::Checkpointer* ck) {
  static $constness std::vector<float> w(6);
  return ck->RegisterReplicated("w", w, {2, 3});
}
int main() { return 0; }
CC
  done
  # shellcheck disable=SC2086
  CXX_CMD="$CXX_CMD $flags" compile "$dir/register_.cc" || fail "registering a mutable vector does not compile"
  # shellcheck disable=SC2086
  if CXX_CMD="$CXX_CMD $flags" compile "$dir/register_const.cc" 2>"$dir/err"; then
    fail "a const vector can be registered (restore would write into it)"
  fi
  cat "$dir/err"
  grep -q "no matching function" "$dir/err" || fail "refused, but not for want of an overload"
}
