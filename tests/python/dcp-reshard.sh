#!/bin/sh
# DTensor state (FSDP2 model + AdamW, Shard(1) and Replicate() tensors) at
# another world size, through baton's DCP backend (tests/python/dcp_reshard.py)
# and through baton.Checkpointer (tests/python/dtensor_reshard.py, whose save
# phases also restore in place at their own mesh): saved by 4 ranks and
# restored by 2, saved by 2 and restored by 3, saved on a 2-D (replicate,
# shard) mesh of 2x2 and restored on a 1-D mesh of 2. One launch per phase
# runs both files (torch's start, most of a phase's time, is paid once), one
# directory per pair and file.
. "${srcdir:?set by make check}/tests/lib/suite.sh"
here=$srcdir/tests/python
if [ ! -e "$BATON_BUILD_DIR/python/baton/_baton.so" ]; then
  printf 'SKIP\tpython-dcp-reshard\tpython-dcp-reshard (not built)\tbuilt without the Python extension: %s\n' \
    "${BATON_PYTHON_SUMMARY:-no Python}" >>"$BATON_TEST_RESULTS/python-dcp-reshard.tsv"
  exit 0
fi
base=$(mktemp -d "${TMPDIR:-/tmp}/baton-dcpreshard-XXXXXX") || exit 1
trap 'rm -rf "$base"' EXIT
PYTHONPATH=$BATON_BUILD_DIR/python:$here${PYTHONPATH:+:$PYTHONPATH}
PYTHONDONTWRITEBYTECODE=1
BATON_COLLECTIVE_TIMEOUT=${BATON_COLLECTIVE_TIMEOUT:-60}
export PYTHONPATH PYTHONDONTWRITEBYTECODE BATON_COLLECTIVE_TIMEOUT
rc=0
# pair:what:ranks:mesh
for phase in ${BATON_DCP_PHASES:-a:save:4:4 a:restore:2:2 b:save:2:2 b:restore:3:3 c:save:4:2x2 c:restore:2:2}; do
  IFS=: read -r pair what n mesh <<EOP
$phase
EOP
  mkdir -p "$base/$pair/checkpointer"
  BATON_DCP_RESHARD_DIR=$base/$pair BATON_DCP_MESH=$mesh \
    BATON_DTENSOR_RESHARD_DIR=$base/$pair/checkpointer BATON_DTENSOR_MESH=$mesh \
    run_suite "python-dcp-reshard-$pair-$what-$mesh" 300 "$srcdir/tests/lib/mpirun-ranks" "$n" \
    "${BATON_PYTHON:-/usr/bin/python3}" -m pytest -p no:cacheprovider -q -rs --rootdir="$here" -c /dev/null \
    "$here/dcp_reshard.py" "$here/dtensor_reshard.py" -k "test_${what}_at_$n" || rc=1
done
exit $rc
