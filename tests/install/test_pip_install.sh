# shellcheck shell=bash
# `pip install` of baton's Python package as a user does it (pyproject.toml,
# setup.py): an sdist and a wheel built from the source tree against a staged
# `make install` of libbaton (found through pkg-config, as mpi4py and h5py
# find MPI and HDF5), the wheel installed into a fresh virtual environment
# without Debian's site packages whose torch is an older torch 2 than the
# project's, and a 2-rank Checkpointer and dcp.save/dcp.load round trip
# there under mpirun. Run by scripts/check after tests/install/test_install.sh.
#
# The torch of that environment comes from $BATON_PIP_VENV (default
# /opt/baton-pip-venv; scripts/install-deps --with-pip-venv makes it from
# scripts/requirements-pip-venv.txt and keeps it until its pins change): the
# fresh venv sees its site-packages through a .pth file, so that each run
# installs baton into an environment of its own without downloading torch
# (gigabytes) again.

pip_venv() { echo "${BATON_PIP_VENV:-/opt/baton-pip-venv}"; }
work() { echo "$BATON_TEST_RESULTS/pip-install"; }

# The torch version the pins name (torch==X in the requirements file).
pinned_torch() { sed -n 's/^torch==//p' "$REPO/scripts/requirements-pip-venv.txt"; }

need_pip_venv() {
  local v; v=$(pip_venv)
  if [ ! -x "$v/bin/python" ]; then
    echo "no $v (scripts/install-deps --with-pip-venv makes it; scripts/check runs that)"
    exit 77
  fi
}

# libbaton staged with `make install DESTDIR=...`, and a baton.pc that names
# the staged prefix (as one installed with --prefix=STAGE/usr/local would).
stage_libbaton() {
  local d=$1
  make -C "$BATON_BUILD_DIR" install DESTDIR="$d/stage" >/dev/null
  mkdir -p "$d/pc"
  sed "s|^prefix=.*|prefix=$d/stage/usr/local|" "$d/stage/usr/local/lib/pkgconfig/baton.pc" >"$d/pc/baton.pc"
}

test_package_version_is_configures() {
  local want got
  want=$(sed -n 's/^AC_INIT(\[baton\], \[\([^]]*\)\].*/\1/p' "$REPO/configure.ac")
  got=$(sed -n 's/^VERSION = "\([^"]*\)".*/\1/p' "$REPO/setup.py")
  expect_eq "$got" "$want" "setup.py's VERSION (configure.ac's AC_INIT)"
}

# Without libbaton the build stops with one message that names what is
# missing (pkg-config, baton.pc, PKG_CONFIG_PATH), not a compiler error.
test_without_libbaton_the_build_names_what_is_missing() {
  need_pip_venv
  local d out rc=0
  d=$(work)/missing
  rm -rf "$d"; mkdir -p "$d"
  out=$(cd "$REPO" && PKG_CONFIG_PATH="$d/none" PKG_CONFIG_LIBDIR="$d/none" \
    "$(pip_venv)/bin/python" -m build --wheel --no-isolation --outdir "$d/dist" . 2>&1) || rc=$?
  [ "$rc" -ne 0 ] || fail "the wheel built without libbaton: $out"
  grep -q "baton: cannot build the Python package: libbaton is not installed where pkg-config looks" <<<"$out" ||
    fail "no message naming libbaton: $(tail -n 20 <<<"$out")"
  grep -q "Package baton was not found" <<<"$out" || fail "pkg-config's own words are not quoted: $out"
  grep -q "PKG_CONFIG_PATH" <<<"$out" || fail "PKG_CONFIG_PATH is not named: $out"
  ! grep -q "error: command .*g++" <<<"$out" || fail "the compiler ran: $out"
  [ ! -e "$d/dist" ] || [ -z "$(ls "$d/dist")" ] || fail "something was built: $(ls "$d/dist")"
  rm -rf "$REPO/build" "$d"
}

test_sdist_and_wheel_build_against_the_installed_libbaton() {
  need_pip_venv
  local d py out
  d=$(work)
  rm -rf "$d"; mkdir -p "$d"
  stage_libbaton "$d"
  py=$(pip_venv)/bin/python
  # python -m build: the sdist from the tree, then the wheel from the sdist
  # (so that the sdist is proven complete); the build tools are the pinned
  # ones of the venv (--no-isolation: no download at each run).
  out=$(cd "$REPO" && PKG_CONFIG_PATH="$d/pc" "$py" -m build --no-isolation --outdir "$d/dist" . 2>&1) ||
    fail "python -m build failed: $(tail -n 30 <<<"$out")"
  rm -rf "$REPO/build"
  local sdist wheel
  sdist=$(ls "$d"/dist/baton-*.tar.gz) || fail "no sdist in $d/dist: $(ls "$d/dist")"
  wheel=$(ls "$d"/dist/baton-*.whl) || fail "no wheel in $d/dist: $(ls "$d/dist")"
  echo "built $(basename "$sdist") $(basename "$wheel")"
  # The sdist holds the package and the extension's sources, not the C++ library.
  local listing
  listing=$(tar -tzf "$sdist")
  for f in pyproject.toml setup.py python/baton/__init__.py python/baton/dcp/writer.py python/src/module.cc \
           python/src/errors.h; do
    grep -q "^baton-[^/]*/$f\$" <<<"$listing" || fail "not in the sdist: $f"
  done
  ! grep -qE "^baton-[^/]*/(ckpt|mpi_runtime|base)/" <<<"$listing" || fail "the sdist holds libbaton's sources"
  # The wheel: the extension linked to the staged libbaton.so by its rpath, no libbaton inside.
  local names
  names=$("$py" -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$wheel")
  grep -q '^baton/_baton\..*\.so$' <<<"$names" || fail "no baton/_baton*.so in the wheel: $names"
  grep -q '^baton/dcp/reader\.py$' <<<"$names" || fail "no baton/dcp in the wheel"
  ! grep -q 'libbaton' <<<"$names" || fail "the wheel carries a libbaton: $names"
}

test_the_wheel_in_a_fresh_venv_round_trips_at_2_ranks() {
  need_pip_venv
  local d wheel venv site out want
  d=$(work)
  wheel=$(ls "$d"/dist/baton-*.whl 2>/dev/null) || fail "no wheel (the case before failed)"
  venv=$d/venv
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/python" -c 'import sys; sys.exit(0 if sys.prefix != sys.base_prefix else 1)' || fail "not a venv"
  ! "$venv/bin/python" -c 'import numpy' 2>/dev/null || fail "the fresh venv sees a numpy before anything is installed"
  # The kept venv's packages (torch, numpy, mpi4py), not Debian's.
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  "$(pip_venv)/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' >"$site/baton-pip-venv.pth"
  # No index: every dependency must already be there, so that nothing is downloaded.
  out=$("$venv/bin/pip" install --no-input --disable-pip-version-check --no-index "$wheel" 2>&1) ||
    fail "pip install of the wheel failed: $out"
  want=$(pinned_torch)
  [ -n "$want" ] || fail "no torch== pin in scripts/requirements-pip-venv.txt"
  out=$(cd / && env -u PYTHONPATH -u LD_LIBRARY_PATH "$venv/bin/python" -c '
import sys, baton, torch, numpy
print(baton.__file__, baton.__version__, torch.__version__, [p for p in sys.path if "dist-packages" in p])') ||
    fail "import baton failed in the fresh venv: $out"
  echo "$out"
  grep -q "^$venv/lib/python3[.0-9]*/site-packages/baton/__init__.py " <<<"$out" || fail "baton is not the venv's: $out"
  grep -q " $want\(+[a-z0-9]*\)\? \[\]\$" <<<"$out" || fail "not torch $want, or Debian's dist-packages visible: $out"
  # The round trip, 2 ranks, from / (not the source tree), without PYTHONPATH.
  rm -rf "$d/ckpt"
  out=$(cd / && env -u PYTHONPATH -u LD_LIBRARY_PATH BATON_COLLECTIVE_TIMEOUT=120 timeout 300 \
    "$REPO/tests/lib/mpirun-ranks" 2 "$venv/bin/python" "$REPO/tests/install/pip_roundtrip.py" "$d/ckpt" "$want" 2>&1) ||
    fail "the round trip failed: $(tail -n 30 <<<"$out")"
  echo "$out"
  # Each rank's line counted by its text, not by lines: mpirun forwards each
  # rank's output in the chunks it reads, so one rank's line can land in the
  # middle of the other's (seen once in 20 runs here, and in CI).
  local r
  for r in 0 1; do
    grep -qo "rank $r of 2: Checkpointer and dcp round trips equal, torch $want" <<<"$out" ||
      fail "rank $r did not print its round trips equal: $out"
  done
  rm -rf "$venv" "$d/ckpt"
}

# Two install-deps at once: the second waits for the first's lock before it
# touches a venv (two at once broke one). The lock is held here; install-deps
# with everything installed and the venv's stamp current has nothing to do,
# so the seconds it takes are the wait.
test_install_deps_waits_for_the_lock() {
  local d lock out t0 rc=0 holder
  d=$(work)/lock
  rm -rf "$d"; mkdir -p "$d"
  lock=$d/install-deps.lock
  flock "$lock" sleep 4 &
  holder=$!
  sleep 0.5
  t0=$(date +%s%N)
  out=$(BATON_INSTALL_LOCK=$lock "$REPO/scripts/install-deps" 2>&1) || rc=$?
  local took_ms=$((($(date +%s%N) - t0) / 1000000))
  wait "$holder"
  [ "$rc" = 0 ] || fail "install-deps exited $rc: $out"
  grep -q "another install-deps holds $lock; waiting for it" <<<"$out" || fail "it did not say it waits: $out"
  [ "$took_ms" -ge 3000 ] || fail "it did not wait for the lock (${took_ms} ms)"
  echo "install-deps waited ${took_ms} ms for the lock"
  rm -rf "$d"
}
