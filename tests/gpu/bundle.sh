#!/bin/sh
# The GPU bundle built here, without a GPU (tests/gpu/test_bundle.sh): its
# MPI-free build, its size, its skip. About a minute on 2 cores (two builds).
. "$srcdir/tests/lib/suite.sh"
run_suite gpu-bundle 600 bash "$srcdir/tests/lib/run-cases" gpu-bundle "$srcdir/tests/gpu/test_bundle.sh"
