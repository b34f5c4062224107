#!/bin/sh
# Resharding from Python (tests/python/reshard_state_dict.py): baton.Sharded
# rows saved by 3 ranks, restored by 2 (which save again), restored by 4;
# one launch per phase on one directory. Then 4 ranks as two nodes of two
# (SLURM_NODEID set per rank: the Runtime's topology) restore replicated
# tensors in a part per node.
. "${srcdir:?set by make check}/tests/lib/suite.sh"
here=$srcdir/tests/python
if [ ! -e "$BATON_BUILD_DIR/python/baton/_baton.so" ]; then
  printf 'SKIP\tpython-reshard\tpython-reshard (not built)\tbuilt without the Python extension: %s\n' \
    "${BATON_PYTHON_SUMMARY:-no Python}" >>"$BATON_TEST_RESULTS/python-reshard.tsv"
  exit 0
fi
base=$(mktemp -d "${TMPDIR:-/tmp}/baton-pyreshard-XXXXXX") || exit 1
trap 'rm -rf "$base"' EXIT
BATON_PY_RESHARD_DIR=$base/ckpt
PYTHONPATH=$BATON_BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}
PYTHONDONTWRITEBYTECODE=1
BATON_COLLECTIVE_TIMEOUT=${BATON_COLLECTIVE_TIMEOUT:-60}
export BATON_PY_RESHARD_DIR PYTHONPATH PYTHONDONTWRITEBYTECODE BATON_COLLECTIVE_TIMEOUT
rc=0
for phase in save:3 restore:2 restore:4; do
  what=${phase%:*} n=${phase#*:}
  run_suite "python-reshard-$what-$n" 300 "$srcdir/tests/lib/mpirun-ranks" "$n" "${BATON_PYTHON:-/usr/bin/python3}" \
    -m pytest -p no:cacheprovider -q -rs --rootdir="$here" -c /dev/null "$here/reshard_state_dict.py" \
    -k "test_${what}_at_$n" || rc=1
done
# shellcheck disable=SC2016  # expanded by each rank's own shell
run_suite "python-reshard-by-node-4" 300 "$srcdir/tests/lib/mpirun-ranks" 4 sh -c \
  'SLURM_NODEID=$((OMPI_COMM_WORLD_RANK / 2)) exec "$0" "$@"' "${BATON_PYTHON:-/usr/bin/python3}" \
  -m pytest -p no:cacheprovider -q -rs --rootdir="$here" -c /dev/null "$here/reshard_state_dict.py" \
  -k test_replicated_by_node_at_4 || rc=1
exit $rc
