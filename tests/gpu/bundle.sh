#!/bin/sh
# The GPU bundle built here, without a GPU (tests/gpu/test_bundle.sh): its
# MPI-free build, its size, its skip. About a minute on 2 cores (two builds).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite gpu-bundle 600 bash "${srcdir:?set by make check}/tests/lib/run-cases" gpu-bundle "${srcdir:?set by make check}/tests/gpu/test_bundle.sh"
