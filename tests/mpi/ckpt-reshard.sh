#!/bin/sh
# Resharding: one launch saves (group size 2), a second launch of another
# size restores from the same directory: 8 -> 4, 4 -> 8, 8 -> 3 ranks.
. "${srcdir:?set by make check}/tests/lib/suite.sh"
base=$(mktemp -d "${TMPDIR:-/tmp}/baton-reshard-XXXXXX") || exit 1
trap 'rm -rf "$base"' EXIT
rc=0
for pair in 8:4 4:8 8:3; do
  from=${pair%:*} to=${pair#*:}
  BATON_CKPT_RESHARD_DIR="$base/$from-to-$to"
  export BATON_CKPT_RESHARD_DIR
  run_suite "ckpt-reshard-$from-to-$to-save" 300 "${srcdir:?set by make check}/tests/lib/mpirun-ranks" "$from" \
    "$BATON_BUILD_DIR/tests/mpi/baton_ckpt_tests" --gtest_filter='Reshard.Save' || rc=1
  run_suite "ckpt-reshard-$from-to-$to-restore" 300 "${srcdir:?set by make check}/tests/lib/mpirun-ranks" "$to" \
    "$BATON_BUILD_DIR/tests/mpi/baton_ckpt_tests" --gtest_filter='Reshard.Restore' || rc=1
done
exit $rc
