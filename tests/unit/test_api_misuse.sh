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
