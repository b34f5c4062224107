#!/bin/sh
# libbaton.so and the programs without CUDA (tests/unit/test_no_cuda.sh).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite no-cuda 300 bash "${srcdir:?set by make check}/tests/lib/run-cases" no-cuda "${srcdir:?set by make check}/tests/unit/test_no_cuda.sh"
