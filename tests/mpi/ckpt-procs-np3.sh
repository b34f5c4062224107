#!/bin/sh
# Checkpoints across processes, 3 ranks (tests/mpi/test_ckpt_processes.sh,
# baton_ckpt_prog): a restore that dies while reading a version is counted
# toward its quarantine, one preempted (SIGTERM, every rank alive) is not;
# a second live writer is refused; a dead one's lock is free; a rank killed in its background write (SaveAsync) leaves the
# previous version; an asynchronous version reads with verify, h5dump, h5py;
# every newer dtype round-trips and reads with h5py as its numpy type.
. "${srcdir:?set by make check}/tests/lib/suite.sh"
run_suite ckpt-procs-np3 300 bash "${srcdir:?set by make check}/tests/lib/run-cases" ckpt-procs-np3 "${srcdir:?set by make check}/tests/mpi/test_ckpt_processes.sh"
