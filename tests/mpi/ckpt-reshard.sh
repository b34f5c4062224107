#!/bin/sh
# Resharding: one launch saves, a second launch of another size restores from
# the same directory. Shard groups of 2 ranks: 8 -> 4, 4 -> 8, 8 -> 3; one
# file per rank (issue 32, item 10): SaveAsync 8 -> 3 and 3 -> 8, level 2 on
# (2 ranks per "node") 4 -> 6.
. "${srcdir:?set by make check}/tests/lib/suite.sh"
base=$(mktemp -d "${TMPDIR:-/tmp}/baton-reshard-XXXXXX") || exit 1
trap 'rm -rf "$base"' EXIT
rc=0
for case in group:8:4 group:4:8 group:8:3 async:8:3 async:3:8 level2:4:6; do
  mode=${case%%:*} pair=${case#*:}
  from=${pair%:*} to=${pair#*:}
  BATON_CKPT_RESHARD_DIR="$base/$mode-$from-to-$to"
  BATON_CKPT_RESHARD_MODE=$mode
  export BATON_CKPT_RESHARD_DIR BATON_CKPT_RESHARD_MODE
  name=ckpt-reshard-$from-to-$to
  [ "$mode" = group ] || name=ckpt-reshard-$mode-$from-to-$to
  run_suite "$name-save" 300 "${srcdir:?set by make check}/tests/lib/mpirun-ranks" "$from" \
    "$BATON_BUILD_DIR/tests/mpi/baton_ckpt_tests" --gtest_filter='Reshard.Save' || rc=1
  run_suite "$name-restore" 300 "${srcdir:?set by make check}/tests/lib/mpirun-ranks" "$to" \
    "$BATON_BUILD_DIR/tests/mpi/baton_ckpt_tests" --gtest_filter='Reshard.Restore' || rc=1
done
exit $rc
