#!/bin/sh
# `baton report` on the event log of real baton-train runs under mpirun with
# 3 ranks: an agreed stop and a killed rank, each resumed
# (tests/mpi/test_report.sh).
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite report-np3 300 bash "${srcdir:?set by make check}/tests/lib/run-cases" report-np3 "${srcdir:?set by make check}/tests/mpi/test_report.sh"
