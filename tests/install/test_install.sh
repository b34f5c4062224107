# shellcheck shell=bash
# `make install` into a staging directory, then a program built only from
# what was installed (pkg-config baton). Run by scripts/check.

stage() { echo "$BATON_TEST_RESULTS/install-stage"; }

# A pkg-config directory whose baton.pc names the staged prefix, as one
# installed with --prefix=STAGE/usr/local would. (Not --define-variable or
# --define-prefix: they rewrite the prefix of ompi-c.pc and hdf5's too.)
staged_pc_dir() {
  local d=$1
  mkdir -p "$d/pc"
  sed "s|^prefix=.*|prefix=$d/usr/local|" "$d/usr/local/lib/pkgconfig/baton.pc" >"$d/pc/baton.pc"
  echo "$d/pc"
}

# The plugin directory as `make install` expands it (${libdir}/slurm by default).
installed_plugindir() {
  make -s --no-print-directory -C "$BATON_BUILD_DIR" -f Makefile -f - print-plugindir <<'MK'
print-plugindir:
	@echo $(plugindir)
MK
}

test_make_install_stages_everything() {
  local d; d=$(stage)
  rm -rf "$d"
  make -C "$BATON_BUILD_DIR" install DESTDIR="$d" >/dev/null
  local plugindir
  plugindir=$(installed_plugindir)
  case $plugindir in /usr/local/*) ;; *) fail "the plugin directory $plugindir is outside the prefix /usr/local" ;; esac
  for f in usr/local/bin/baton usr/local/include/baton/status.h usr/local/include/baton/log.h \
           usr/local/include/baton/version.h usr/local/lib/libbaton.so usr/local/lib/pkgconfig/baton.pc \
           usr/local/share/man/man1/baton.1 usr/local/share/man/man7/baton.7 \
           usr/local/share/man/man3/baton.3 usr/local/share/man/man8/spank-baton.8 \
           usr/local/share/doc/baton/docs/recovery.md usr/local/share/doc/baton/examples/train.sbatch "${plugindir#/}/spank_baton.so"; do
    [ -e "$d/$f" ] || fail "not installed: /$f"
  done
  [ ! -e "$d/${plugindir#/}/spank_baton.la" ] || fail "libtool's spank_baton.la was installed into the plugin directory"
}

test_a_program_builds_against_the_installed_baton() {
  local d; d=$(stage)
  [ -d "$d" ] || fail "nothing staged"
  cat > "$d/prog.cc" <<'CC'
#include <baton/log.h>
#include <baton/status.h>
#include <baton/version.h>
#include <cstdio>
int main() {
  baton::Status s = baton::Status::InvalidArgument("cli", "value 'x' is bad");
  BATON_LOG(kCli, info) << "installed baton " << baton::kVersion;
  std::printf("%s\n", s.ToString().c_str());
  return s.ok() ? 1 : 0;
}
CC
  local flags
  flags=$(PKG_CONFIG_SYSROOT_DIR="$d" PKG_CONFIG_PATH="$d/usr/local/lib/pkgconfig" pkg-config --cflags --libs baton)
  echo "pkg-config: $flags"
  # shellcheck disable=SC2086
  g++ -std=c++17 "$d/prog.cc" -o "$d/prog" $flags
  local out
  out=$(LD_LIBRARY_PATH="$d/usr/local/lib" "$d/prog" 2>&1)
  echo "$out"
  grep -q "baton.cli INFO .*installed baton [0-9]" <<<"$out" || fail "no log line from the installed library"
  grep -q "baton\[cli\] InvalidArgument (.*): value 'x' is bad" <<<"$out" || fail "no status text"
}

# The main job's sources as installed (docdir/examples/train) build against the
# installed baton alone: the example uses only the public API.
test_baton_train_builds_from_its_installed_sources() {
  local d; d=$(stage)
  [ -d "$d" ] || fail "nothing staged"
  local src=$d/usr/local/share/doc/baton/examples/train flags out
  [ -f "$src/main.cc" ] || fail "baton-train's sources are not installed in $src"
  [ -f "$d/usr/local/share/doc/baton/examples/train.sbatch" ] || fail "train.sbatch is not installed"
  [ -f "$d/usr/local/share/man/man1/baton-train.1" ] || fail "baton-train(1) is not installed"
  [ -f "$d/usr/local/share/man/man1/baton-run.1" ] || fail "baton-run(1) is not installed"
  # (not PKG_CONFIG_SYSROOT_DIR: it would prefix MPI's system include path too)
  flags=$(PKG_CONFIG_PATH=$(staged_pc_dir "$d") pkg-config --cflags --libs baton)
  # shellcheck disable=SC2086
  g++ -std=c++17 -O2 "$src"/*.cc -o "$d/baton-train" $flags
  out=$(LD_LIBRARY_PATH="$d/usr/local/lib" "$d/baton-train" --make-data "$d/data.bin" --samples 64 --features 8)
  echo "$out"
  grep -q "^wrote $d/data.bin: 64 samples x 8 features" <<<"$out" || fail "the installed-source build does not run"
}

# The README's advice for a prefix the loader does not search: built with
# pkg-config alone the program cannot start; with the rpath it names
# (pkg-config --variable=libdir), or with LD_LIBRARY_PATH, it runs.
test_a_program_against_a_non_system_prefix_runs_with_the_rpath() {
  local d; d=$(stage)
  [ -d "$d" ] || fail "nothing staged"
  local prefix=$d/usr/local pc libdir flags out rc
  pc=(env PKG_CONFIG_PATH="$(staged_pc_dir "$d")" pkg-config)
  libdir=$("${pc[@]}" --variable=libdir baton)
  expect_eq "$libdir" "$prefix/lib" "pkg-config --variable=libdir baton"
  flags=$("${pc[@]}" --cflags --libs baton)
  cat > "$d/rpath.cc" <<'CC'
#include <baton/status.h>
#include <cstdio>
int main() {
  std::printf("%s\n", baton::Status::NotFound("ckpt", "no version").ToString().c_str());
  return 0;
}
CC
  # shellcheck disable=SC2086  # $flags is pkg-config's word list
  g++ -std=c++17 "$d/rpath.cc" -o "$d/no-rpath" $flags
  # shellcheck disable=SC2086
  g++ -std=c++17 "$d/rpath.cc" -o "$d/with-rpath" $flags -Wl,-rpath,"$libdir"

  # Without either, the loader does not find the library (unless a libbaton.so.0
  # is installed where it looks: then this half proves nothing, and says so).
  if ldconfig -p 2>/dev/null | grep -q 'libbaton\.so\.0 ' || [ -e /usr/local/lib/libbaton.so.0 ] ||
     [ -e /usr/lib/libbaton.so.0 ]; then
    echo "note: a libbaton.so.0 is installed on this machine; the failure without an rpath is not checked"
  else
    rc=0; out=$(env -u LD_LIBRARY_PATH "$d/no-rpath" 2>&1) || rc=$?
    [ "$rc" -ne 0 ] || fail "the program without an rpath ran: $out"
    grep -q "libbaton.so.0: cannot open shared object file" <<<"$out" || fail "unexpected failure: $out"
  fi
  out=$(env -u LD_LIBRARY_PATH "$d/with-rpath" 2>&1) || fail "the program with -Wl,-rpath,$libdir failed: $out"
  grep -q "NotFound" <<<"$out" || fail "no status text: $out"
  out=$(LD_LIBRARY_PATH="$libdir" "$d/no-rpath" 2>&1) || fail "the program with LD_LIBRARY_PATH=$libdir failed: $out"
  grep -q "NotFound" <<<"$out" || fail "no status text: $out"
}

# The Python package: installed into the directory configure chose (the
# interpreter's sys.path entry under the prefix), the module without
# libtool's .la, and importable from there.
installed_pythondir() {
  make -s --no-print-directory -C "$BATON_BUILD_DIR" -f Makefile -f - print-pythondir <<'MK'
print-pythondir:
	@echo '$(baton_pyexecdir)' '$(PYTHON)' '$(BATON_PYTHON_SUMMARY)'
MK
}

test_python_package_is_installed_where_python_finds_it() {
  local d; d=$(stage)
  [ -d "$d" ] || fail "nothing staged"
  local dir python rest
  read -r dir python rest <<<"$(installed_pythondir)"
  case $rest in no*) echo "built without the Python extension: $rest"; exit 77 ;; esac
  [ -e "$d$dir/_baton.so" ] || fail "not installed: $dir/_baton.so"
  [ ! -e "$d$dir/_baton.la" ] || fail "libtool's _baton.la was installed into $dir"
  "$python" -c 'import sys; sys.exit(0 if sys.argv[1] in sys.path else 1)' "$(dirname "$dir")" ||
    fail "$(dirname "$dir") is not on $python's sys.path"
  local out
  out=$(cd / && PYTHONPATH="$d$(dirname "$dir")" LD_LIBRARY_PATH="$d/usr/local/lib" "$python" -c '
import baton._baton as b, sys
print(b.__file__, b.EXIT_REQUEUE, b.__version__)') || fail "the installed package does not import: $out"
  echo "$out"
  grep -q "^$d$dir/_baton.so 75 [0-9]" <<<"$out" || fail "imported something else: $out"
}

# The installed `baton ckpt import|export` runs the installed package, not the
# build tree's: staged (not at its real path), it names the install directory
# it looked in; pointed at the staged package (BATON_PYTHONPATH), it imports a
# torch.save file that `baton ckpt verify` accepts.
test_installed_ckpt_import_runs_the_installed_package() {
  local d; d=$(stage)
  [ -d "$d" ] || fail "nothing staged"
  local dir python rest
  read -r dir python rest <<<"$(installed_pythondir)"
  case $rest in no*) echo "built without the Python extension: $rest"; exit 77 ;; esac
  "$python" -c 'import torch' 2>/dev/null || { echo "no torch for $python (scripts/install-deps --with-torch)"; exit 77; }
  local work out rc=0
  work=$(mktemp -d "$BATON_TEST_RESULTS/install-convert.XXXXXX")
  "$python" -c 'import sys, torch; torch.save({"w": torch.arange(6.0), "n": 3}, sys.argv[1])' "$work/in.pt"
  out=$(cd / && LD_LIBRARY_PATH="$d/usr/local/lib" "$d/usr/local/bin/baton" ckpt import "$work/in.pt" "$work/b" 2>&1) || rc=$?
  [ "$rc" = 2 ] || fail "the staged baton ckpt import exited $rc, not 2, without its package: $out"
  grep -qF "is not in $(dirname "$dir")" <<<"$out" || fail "it did not name the install directory $(dirname "$dir"): $out"
  [ ! -e "$work/b" ] || fail "it wrote $work/b"
  out=$(cd / && LD_LIBRARY_PATH="$d/usr/local/lib" BATON_PYTHONPATH="$d$(dirname "$dir")" \
    "$d/usr/local/bin/baton" ckpt import "$work/in.pt" "$work/b" 2>&1) || fail "the staged import failed: $out"
  grep -q "as step 0" <<<"$out" || fail "unexpected output: $out"
  out=$(LD_LIBRARY_PATH="$d/usr/local/lib" "$d/usr/local/bin/baton" ckpt verify "$work/b" 2>&1) ||
    fail "verify failed on the imported version: $out"
  rm -rf "$work"
}

# `make uninstall` removes every file `make install` put down, the plugin too
# (its .la is deleted at install, so libtool alone would not know it).
test_make_uninstall_leaves_no_file() {
  local d; d=$(stage)-uninstall
  rm -rf "$d"
  make -C "$BATON_BUILD_DIR" install DESTDIR="$d" >/dev/null
  [ -e "$d$(installed_plugindir)/spank_baton.so" ] || fail "the plugin was not installed"
  make -C "$BATON_BUILD_DIR" uninstall DESTDIR="$d" >/dev/null
  local left
  left=$(find "$d" -not -type d)
  [ -z "$left" ] || fail "left after make uninstall: $left"
  rm -rf "$d"
}
