# shellcheck shell=bash
# Cases for tests/spank/linkage.sh (make check): the plugin's boundary.
PLUGIN="$BATON_BUILD_DIR/spank/.libs/spank_baton.so"

test_exports_only_slurm_entry_points_and_plugin_symbols() {
  local exported bad
  exported=$(nm -D --defined-only "$PLUGIN" | awk '{print $3}')
  echo "$exported"
  bad=$(grep -vE '^(slurm_spank_[a-z_]+|plugin_(name|type|version))$' <<<"$exported" || true)
  [ -z "$bad" ] || fail "unexpected exported symbols: $bad"
  for sym in plugin_name plugin_type plugin_version slurm_spank_init slurm_spank_task_init slurm_spank_exit; do
    grep -qx "$sym" <<<"$exported" || fail "$sym is not exported"
  done
}

test_links_neither_mpi_nor_hdf5_nor_a_second_libslurm() {
  local needed
  needed=$(objdump -p "$PLUGIN" | awk '/NEEDED/ {print $2}')
  echo "$needed"
  if grep -iE 'mpi|hdf5|slurm|boost' <<<"$needed"; then fail "the plugin links one of the above"; fi
  # Slurm's functions stay undefined: srun and slurmstepd provide them.
  grep -q ' slurm_hostlist_create$' <<<"$(nm -D --undefined-only "$PLUGIN")" || fail "slurm_hostlist_create is not left to the host process"
}

test_cli_links_libslurm() {
  local needed
  local bin="$BATON_BUILD_DIR/cli/baton"
  # Linked against the uninstalled libbaton, libtool puts the real binary in .libs/.
  [ -f "$BATON_BUILD_DIR/cli/.libs/baton" ] && bin="$BATON_BUILD_DIR/cli/.libs/baton"
  needed=$(objdump -p "$bin" | awk '/NEEDED/ {print $2}')
  echo "$needed"
  grep -q '^libslurm' <<<"$needed" || fail "cli/baton does not link libslurm"
}
