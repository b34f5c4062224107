#!/bin/sh
# The package's pure modules without MPI (tests/python/pure_modules.py, storage_module.py,
# staging_module.py): the safe unpickler, baton.latest, DCP chunk names, baton.storage (the
# only caller of the extension's storage, its pure part), BatonWriter's staged copy. One
# pytest process, no mpirun. A few seconds (torch's import).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
here=$srcdir/tests/python
if [ ! -e "$BATON_BUILD_DIR/python/baton/_baton.so" ]; then
  printf 'SKIP\tpure-modules\tpure-modules (not built)\tbuilt without the Python extension: %s\n' \
    "${BATON_PYTHON_SUMMARY:-no Python}" >>"$BATON_TEST_RESULTS/pure-modules.tsv"
  exit 0
fi
PYTHONDONTWRITEBYTECODE=1
PYTHONPATH=$BATON_BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE PYTHONPATH
run_suite pure-modules 120 "${BATON_PYTHON:-/usr/bin/python3}" -m pytest -p no:cacheprovider -q -rs \
  --rootdir="$here" -c /dev/null "$here/pure_modules.py" "$here/storage_module.py" \
  "$here/staging_module.py"
