#!/bin/sh
# baton.metadata, the JSON codec of non-array leaves, without MPI
# (tests/python/metadata_codec.py): round trips, the format on disk, refusals
# naming the path, hostile blobs. One pytest process, no mpirun, no torch.
. "${srcdir:?set by make check}/tests/lib/suite.sh"
here=$srcdir/tests/python
if [ ! -e "$BATON_BUILD_DIR/python/baton/_baton.so" ]; then
  printf 'SKIP\tmetadata-codec\tmetadata-codec (not built)\tbuilt without the Python extension: %s\n' \
    "${BATON_PYTHON_SUMMARY:-no Python}" >>"$BATON_TEST_RESULTS/metadata-codec.tsv"
  exit 0
fi
PYTHONDONTWRITEBYTECODE=1
PYTHONPATH=$BATON_BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE PYTHONPATH
run_suite metadata-codec 120 "${BATON_PYTHON:-/usr/bin/python3}" -m pytest -p no:cacheprovider -q -rs \
  --rootdir="$here" -c /dev/null "$here/metadata_codec.py"
