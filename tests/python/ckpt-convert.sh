#!/bin/sh
# baton ckpt import|export, the real command (tests/python/ckpt_convert_cli.py):
# a DCP directory and a torch.save file into baton versions, verify/ls/inspect
# on them, exports back that load equal, bad input refused with exit 2. One
# pytest process; each command a process of its own. About 40 s (each run
# of the converter starts Python and torch).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
here=$srcdir/tests/python
if [ ! -e "$BATON_BUILD_DIR/python/baton/_baton.so" ]; then
  printf 'SKIP\tckpt-convert\tckpt-convert (not built)\tbuilt without the Python extension: %s\n' \
    "${BATON_PYTHON_SUMMARY:-no Python}" >>"$BATON_TEST_RESULTS/ckpt-convert.tsv"
  exit 0
fi
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
run_suite ckpt-convert 300 "${BATON_PYTHON:-/usr/bin/python3}" -m pytest -p no:cacheprovider -q -rs \
  --rootdir="$here" -c /dev/null "$here/ckpt_convert_cli.py"
