# `make install` into a staging directory, then a program built only from
# what was installed (pkg-config baton). Run by scripts/check.

stage() { echo "$BATON_TEST_RESULTS/install-stage"; }

test_make_install_stages_everything() {
  local d; d=$(stage)
  rm -rf "$d"
  make -C "$BATON_BUILD_DIR" install DESTDIR="$d" >/dev/null
  local plugindir
  plugindir=$(sed -n 's/^SLURM_PLUGINDIR = //p' "$BATON_BUILD_DIR/Makefile")
  for f in usr/local/bin/baton usr/local/include/baton/status.h usr/local/include/baton/log.h \
           usr/local/include/baton/version.h usr/local/lib/libbaton.so usr/local/lib/pkgconfig/baton.pc \
           usr/local/share/man/man1/baton.1 usr/local/share/man/man7/baton.7 \
           usr/local/share/man/man3/baton.3 usr/local/share/man/man8/spank-baton.8 "${plugindir#/}/spank_baton.so"; do
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
  # (not PKG_CONFIG_SYSROOT_DIR: it would prefix MPI's system include path too)
  flags=$(PKG_CONFIG_PATH="$d/usr/local/lib/pkgconfig" pkg-config --define-variable=prefix="$d/usr/local" --cflags --libs baton)
  # shellcheck disable=SC2086
  g++ -std=c++17 -O2 "$src"/*.cc -o "$d/baton-train" $flags
  out=$(LD_LIBRARY_PATH="$d/usr/local/lib" "$d/baton-train" --make-data "$d/data.bin" --samples 64 --features 8)
  echo "$out"
  grep -q "^wrote $d/data.bin: 64 samples x 8 features" <<<"$out" || fail "the installed-source build does not run"
}
